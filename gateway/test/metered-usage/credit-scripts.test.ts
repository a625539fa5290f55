import { describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { buildCreditsSpec } from '@ent/common/metering/credit-spec';
import { rolloverCreditId } from '@ent/common/metering/credits';
import { meteredPeriodOf, meteredTermsOf } from '@ent/common/resolve/resolve';
import { withScripts } from '@ent/common/redis/commands';
import { creditBalanceDirtyMember } from '@ent/common/redis/keys';
import type { SubscriberDoc } from '@ent/common/snapshots/documents';
import {
  answerOf,
  gateOperationArguments,
  meteredOperation,
  type MeteredKind,
  type MeteredOutcome,
} from '../../src/metering/metered-operations.ts';
import { promotionAndTopUp, proMeteredCatalog } from '../../../test-support/metered-documents.ts';
import {
  SEEDED_VERSIONS,
  meteringTestRedis,
  openEvalMeter,
  seededOrganizations,
  unpersistedBalances,
} from '../../../test-support/metering-redis.ts';

const { keys, redis } = meteringTestRedis();
const START = Date.parse('2026-03-10T00:00:00Z');
const MARCH = Date.parse('2026-03-01T00:00:00Z');
const APRIL = Date.parse('2026-04-01T00:00:00Z');
const HOUR = 3_600_000;
const clock = new ManualClock(START);

const catalog = proMeteredCatalog({ calls: { limit: 10 }, rolls: { limit: 10, rollover: 4 } });

/** A promotional credit live from START + 1 h to START + 3 h, spent first; a top-up that never expires. */
const { promo, topUp } = promotionAndTopUp(START);
const alice: SubscriberDoc = {
  exists: true,
  plans: ['pro'],
  overrides: {},
  subscribedAt: { pro: Date.parse('2025-12-15T00:00:00Z') },
  credits: { calls: [topUp, promo] },
};

const seededOrganization = seededOrganizations({ redis, keys, catalog, subscribers: { alice } });
const organization = (subscriber: SubscriberDoc = alice) =>
  seededOrganization({ subscribers: { alice: subscriber } });

const op = (org: string, kind: MeteredKind, feature: string, amount: number, subscriber = alice) =>
  meteredOperation(
    { catalog, subscriber, ...SEEDED_VERSIONS },
    'alice',
    feature,
    kind,
    amount,
    clock.now(),
    '',
    keys,
    org,
  );

const gateMeter = () => openEvalMeter({ redis, keys });
const balances = () => unpersistedBalances({ redis, keys, clock });

/** A consume through the gate call (the eval path), answered as the check route answers it. */
async function consume(org: string, feature: string, amount: number, subscriber = alice) {
  const operation = op(org, 'c', feature, amount, subscriber);
  const result = await gateMeter().gate({
    organizationId: org,
    subscriberId: 'alice',
    nowMs: clock.now(),
    metered: [operation],
  });
  if (result.outcome !== 'counted') throw new Error(`not counted: ${result.outcome}`);
  return answerOf(
    operation,
    result.metered![0] as Extract<MeteredOutcome, { status: 'applied' | 'refused' }>,
  );
}

async function read(org: string, feature: string, subscriber = alice) {
  const operation = op(org, 'r', feature, 0, subscriber);
  const [outcome] = await balances().apply(org, [operation]);
  return answerOf(operation, outcome as Extract<MeteredOutcome, { status: 'applied' | 'refused' }>);
}

const listed = (answer: { credits: { credit_id: string; remaining: number }[] }) =>
  answer.credits.map((credit) => [credit.credit_id, credit.remaining]);

describe('credits in the gate call (metered-balance.fragment.lua through eval-gate-batch-8.lua)', () => {
  it('a consume spends the allowance, then credits in order, and a consume that does not fit is refused whole', async () => {
    const org = await organization();
    clock.set(START + 2 * HOUR);
    expect(await consume(org, 'calls', 10)).toMatchObject({ allowed: true, used: 10, remaining: 8 });
    const spent = await consume(org, 'calls', 6);
    expect(spent).toMatchObject({ allowed: true, used: 16, remaining: 2 });
    expect(listed(spent)).toEqual([['cr_topup', 2]]);
    expect(spent.credits[0]!.expires_at).toBeNull();
    const refused = await consume(org, 'calls', 3);
    expect(refused).toMatchObject({ allowed: false, used: 16, remaining: 2 });
    expect(await redis.hgetall(keys.creditSpent(org, 'alice', 'calls'))).toEqual({
      cr_promo: '5',
      cr_topup: '1',
    });
    expect(await redis.hget(keys.meteredBalance(org, `alice|calls|${MARCH}`), 'k')).toBe('6');
    expect(
      await redis.sismember(keys.meteredDirty(org), creditBalanceDirtyMember(`alice|calls|${MARCH}`)),
    ).toBe(1);
  });

  it('a credit counts from its effective instant, and no longer at its expiry instant (the app clock)', async () => {
    const org = await organization();
    clock.set(START + HOUR - 1);
    await consume(org, 'calls', 10);
    expect(await consume(org, 'calls', 4)).toMatchObject({ allowed: false, remaining: 3 });
    clock.set(START + HOUR);
    const effective = await consume(org, 'calls', 4);
    expect(effective).toMatchObject({ allowed: true, used: 14, remaining: 4 });
    expect(listed(effective)).toEqual([
      ['cr_promo', 1],
      ['cr_topup', 3],
    ]);
    expect(effective.credits[0]!.expires_at).toBe(new Date(START + 3 * HOUR).toISOString());
    clock.set(START + 3 * HOUR - 1);
    expect(listed(await read(org, 'calls'))).toEqual([
      ['cr_promo', 1],
      ['cr_topup', 3],
    ]);
    clock.set(START + 3 * HOUR);
    const expired = await read(org, 'calls');
    expect(expired).toMatchObject({ remaining: 3, allowed: true });
    expect(listed(expired)).toEqual([['cr_topup', 3]]);
    expect(await consume(org, 'calls', 4)).toMatchObject({ allowed: false, used: 14 });
    expect(await consume(org, 'calls', 3)).toMatchObject({ allowed: true, used: 17, remaining: 0 });
  });

  it('gives usage back to the credits in the reverse order, then to the allowance', async () => {
    const org = await organization();
    clock.set(START + 2 * HOUR);
    await consume(org, 'calls', 17);
    expect(await redis.hgetall(keys.creditSpent(org, 'alice', 'calls'))).toEqual({
      cr_promo: '5',
      cr_topup: '2',
    });
    const [outcome] = await balances().apply(org, [op(org, 'd', 'calls', -4)]);
    const answer = answerOf(
      op(org, 'd', 'calls', -4),
      outcome as Extract<MeteredOutcome, { status: 'applied' }>,
    );
    expect(await redis.hgetall(keys.creditSpent(org, 'alice', 'calls'))).toEqual({
      cr_promo: '3',
      cr_topup: '0',
    });
    expect(answer).toMatchObject({ used: 13, remaining: 5 });
    await balances().apply(org, [op(org, 's', 'calls', 1)]);
    expect(await redis.hgetall(keys.creditSpent(org, 'alice', 'calls'))).toEqual({
      cr_promo: '0',
      cr_topup: '0',
    });
    expect(await redis.hmget(keys.meteredBalance(org, `alice|calls|${MARCH}`), 'u', 'k')).toEqual(['1', '0']);
  });
});

describe('the credits section of the gate call (each spec once per call)', () => {
  it("sends a subscriber's credits once for all its operations in one call, which answer as if sent one a call", async () => {
    clock.set(START + 2 * HOUR);
    const amounts = [6, 5, 4, 3];
    const ops = (org: string) => [
      ...amounts.map((amount) => op(org, 'c', 'calls', amount)),
      op(org, 'c', 'rolls', 2),
      op(org, 'r', 'calls', 0),
    ];
    const org = await organization();
    const batched = ops(org);
    const args = gateOperationArguments(
      batched.map((operation) => ({ subscriberId: 'alice', metered: [operation] })),
    );
    const termSets = Number(args[0]);
    const specs = args.slice(2 + termSets * 7, 2 + termSets * 7 + Number(args[1 + termSets * 7]));
    expect(specs).toEqual([batched[0]!.credits, batched[4]!.credits]);
    expect(args.slice(-6 * 5).filter((_, i) => i % 5 === 4)).toEqual([1, 1, 1, 1, 2, 1]);

    // The evals of one organization that arrive while its call is in flight share the next call.
    const gateOf = (
      meter: ReturnType<typeof gateMeter>,
      organizationId: string,
      operation: (typeof batched)[number],
    ) => meter.gate({ organizationId, subscriberId: 'alice', nowMs: clock.now(), metered: [operation] });
    const meter = gateMeter();
    const together = await Promise.all(batched.map((operation) => gateOf(meter, org, operation)));
    const alone: unknown[] = [];
    const aloneOrg = await organization();
    for (const operation of ops(aloneOrg)) {
      const result = await gateOf(gateMeter(), aloneOrg, operation);
      alone.push(result.outcome === 'counted' ? result.metered : result.outcome);
    }
    expect(
      together.map((result) => (result.outcome === 'counted' ? result.metered : result.outcome)),
    ).toEqual(alone);
    expect(alone.map((metered) => (metered as { used: number }[])[0]!.used)).toEqual([6, 11, 15, 18, 2, 18]);
    expect(await redis.hgetall(keys.creditSpent(org, 'alice', 'calls'))).toEqual(
      await redis.hgetall(keys.creditSpent(aloneOrg, 'alice', 'calls')),
    );
  });
});

describe("a usage batch's operations on one balance with credits (usage-apply-6.lua, the call's buffer)", () => {
  it('spend and give back as the same operations sent one a call, the credit-spent hash made within the call', async () => {
    clock.set(START + 2 * HOUR);
    const amounts = [6, 5, 4, -4, 3, 2];
    const ops = (org: string) => amounts.map((amount) => op(org, 'd', 'calls', amount));
    const together = await organization();
    const batched = await balances().apply(together, ops(together));
    const aloneOrg = await organization();
    const alone: unknown[] = [];
    for (const operation of ops(aloneOrg)) alone.push(...(await balances().apply(aloneOrg, [operation])));
    expect(batched).toEqual(alone);
    expect(alone.map((outcome) => (outcome as { used: number }).used)).toEqual([6, 11, 15, 11, 14, 16]);
    expect(await redis.hgetall(keys.creditSpent(together, 'alice', 'calls'))).toEqual({
      [promo.id]: '5',
      [topUp.id]: '1',
    });
    expect(await redis.hgetall(keys.creditSpent(aloneOrg, 'alice', 'calls'))).toEqual(
      await redis.hgetall(keys.creditSpent(together, 'alice', 'calls')),
    );
  });
});

describe('a correction (metered-correct-2.lua) and its undo', () => {
  it("spends and gives back as a report's set does: the allowance, then credits in order; back in reverse", async () => {
    const org = await organization();
    clock.set(START + 2 * HOUR);
    await consume(org, 'calls', 17);
    const member = `alice|calls|${MARCH}`;
    const terms = meteredTermsOf(catalog, alice, 'calls', clock.now());
    const period = meteredPeriodOf(terms, clock.now());
    const { spec } = buildCreditsSpec(
      { catalog, subscriber: alice },
      'alice',
      'calls',
      terms,
      period,
      clock.now(),
    );
    const figures = async () => ({
      balance: await redis.hmget(keys.meteredBalance(org, member), 'u', 'k'),
      spent: await redis.hgetall(keys.creditSpent(org, 'alice', 'calls')),
    });
    const scripts = withScripts(redis);
    const tail = [String(APRIL), String(HOUR), String(terms.limit), '', spec];
    const correct = (used: number) =>
      scripts.meteredCorrect(
        keys.meteredBalance(org, member),
        keys.meteredDirty(org),
        member,
        String(used),
        '',
        '',
        ...tail,
      );
    const undo = (from: number, to: number) =>
      scripts.meteredCorrectUndo(
        keys.meteredBalance(org, member),
        keys.meteredDirty(org),
        member,
        String(from),
        String(to),
        ...tail,
      );
    // 17 = the allowance's 10, the promotion's 5, 2 of the top-up's 3.
    expect(await figures()).toEqual({ balance: ['17', '7'], spent: { cr_promo: '5', cr_topup: '2' } });
    // Up by 3: the top-up's last 1, then 2 of overage (a correction is never refused).
    await correct(20);
    expect(await figures()).toEqual({ balance: ['20', '8'], spent: { cr_promo: '5', cr_topup: '3' } });
    expect(await read(org, 'calls')).toMatchObject({ used: 20, remaining: 0 });
    // Down by 16: the credits last spent first (the top-up, then the promotion), then the allowance.
    await correct(4);
    expect(await figures()).toEqual({ balance: ['4', '0'], spent: { cr_promo: '0', cr_topup: '0' } });
    expect(await read(org, 'calls')).toMatchObject({ used: 4, remaining: 6 + 5 + 3 });
    // Down within what credits covered: they give back, the allowance stays used.
    await correct(17);
    await correct(13);
    expect(await figures()).toEqual({ balance: ['13', '3'], spent: { cr_promo: '3', cr_topup: '0' } });
    // An undo takes the correction's own difference back by the same rule: exactly the figures before it.
    await undo(17, 13);
    expect(await figures()).toEqual({ balance: ['17', '7'], spent: { cr_promo: '5', cr_topup: '2' } });
    await undo(20, 17);
    expect(await figures()).toEqual({ balance: ['20', '8'], spent: { cr_promo: '5', cr_topup: '3' } });
    await undo(17, 20);
    expect(await figures()).toEqual({ balance: ['17', '7'], spent: { cr_promo: '5', cr_topup: '2' } });
  });
});

describe('rollover (a grant with rollover: {max})', () => {
  const ROLLOVER_ID = rolloverCreditId('alice', 'rolls', MARCH);

  it("makes one credit from the previous period's unused allowance, however many first touches race", async () => {
    const org = await organization();
    clock.set(Date.parse('2026-02-10T00:00:00Z'));
    // February's own rollover: January went unused (no balance), so the full max rolled over.
    const february = await consume(org, 'rolls', 3);
    expect(february).toMatchObject({ used: 3, remaining: 11 });
    expect(listed(february)).toEqual([
      [rolloverCreditId('alice', 'rolls', Date.parse('2026-02-01T00:00:00Z')), 4],
    ]);
    clock.set(START);
    const meters = [gateMeter(), gateMeter()];
    const usage = balances();
    const answers = await Promise.all(
      Array.from({ length: 24 }, async (_, i) => {
        const operation = op(org, i % 3 === 2 ? 'r' : 'c', 'rolls', i % 3 === 2 ? 0 : 1);
        const outcome =
          i % 2 === 0
            ? (await usage.apply(org, [operation]))[0]!
            : await meters[i % 4 === 1 ? 0 : 1]!.gate({
                organizationId: org,
                subscriberId: 'alice',
                nowMs: clock.now(),
                metered: [operation],
              }).then((result) => (result.outcome === 'counted' ? result.metered![0]! : null));
        return { operation, outcome: outcome as Extract<MeteredOutcome, { status: 'applied' | 'refused' }> };
      }),
    );
    // 16 consumes of 1 against 10 of allowance and 4 rolled over: 14 applied, 2 refused.
    const consumes = answers.filter(({ operation }) => operation.kind === 'c');
    expect(consumes.filter(({ outcome }) => outcome.status === 'applied')).toHaveLength(14);
    const balance = await redis.hgetall(keys.meteredBalance(org, `alice|rolls|${MARCH}`));
    expect(balance).toMatchObject({ u: '14', k: '4', ro: '4' });
    // Beside February's own rollover record: March's, written once, and what March spent of it.
    expect(await redis.hgetall(keys.creditSpent(org, 'alice', 'rolls'))).toMatchObject({
      [ROLLOVER_ID]: '4',
      [`ro:${ROLLOVER_ID}`]: `4|${Date.parse('2026-02-01T00:00:00Z')}|${MARCH}|${APRIL}`,
    });
    for (const { operation, outcome } of answers) {
      for (const credit of answerOf(operation, outcome).credits) expect(credit.credit_id).toBe(ROLLOVER_ID);
    }
    expect(await read(org, 'rolls')).toMatchObject({ used: 14, remaining: 0, credits: [] });
  });

  it("reads the previous period's own balance: what February left unused, under the max, rolls into March", async () => {
    const org = await organization();
    clock.set(Date.parse('2026-02-10T00:00:00Z'));
    await consume(org, 'rolls', 8);
    clock.set(START);
    expect(await consume(org, 'rolls', 1)).toMatchObject({ used: 1, remaining: 10 - 1 + 2 });
    expect(await redis.hget(keys.meteredBalance(org, `alice|rolls|${MARCH}`), 'ro')).toBe('2');
  });

  it('a period whose predecessor left nothing unused holds no ro: named and drained as a balance without credits', async () => {
    const org = await organization();
    clock.set(Date.parse('2026-02-10T00:00:00Z'));
    await consume(org, 'rolls', 14); // February's allowance of 10 and its 4 rolled over from January, all used
    clock.set(START);
    expect(await consume(org, 'rolls', 1)).toMatchObject({ used: 1, remaining: 9, credits: [] });
    const march = `alice|rolls|${MARCH}`;
    expect(await redis.hgetall(keys.meteredBalance(org, march))).not.toHaveProperty('ro');
    expect(await redis.sismember(keys.meteredDirty(org), march)).toBe(1);
    expect(await redis.sismember(keys.meteredDirty(org), creditBalanceDirtyMember(march))).toBe(0);
  });

  it('makes none for a period before the subscription, and never counts a persisted rollover twice', async () => {
    const newcomer: SubscriberDoc = { ...alice, subscribedAt: { pro: MARCH + HOUR }, credits: {} };
    const org = await organization(newcomer);
    clock.set(START);
    expect(await read(org, 'rolls', newcomer)).toMatchObject({ remaining: 10, credits: [] });
    expect(await redis.hget(keys.meteredBalance(org, `alice|rolls|${MARCH}`), 'ro')).toBeNull();

    // The worker persisted March's rollover: the snapshot holds it as a stored credit, spent from there once.
    const org2 = await organization();
    clock.set(Date.parse('2026-02-10T00:00:00Z'));
    await consume(org2, 'rolls', 8);
    clock.set(START);
    const persisted: SubscriberDoc = {
      ...alice,
      credits: {
        rolls: [
          {
            id: ROLLOVER_ID,
            amount: 2,
            priority: 10,
            effectiveAt: MARCH,
            expiresAt: APRIL,
            createdAt: MARCH,
          },
        ],
      },
    };
    const answer = await consume(org2, 'rolls', 11, persisted);
    expect(answer).toMatchObject({ allowed: true, used: 11, remaining: 1 });
    expect(listed(answer)).toEqual([[ROLLOVER_ID, 1]]);
    expect(await consume(org2, 'rolls', 2, persisted)).toMatchObject({ allowed: false, remaining: 1 });
  });
});
