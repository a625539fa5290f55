import { createHash } from 'node:crypto';
import { creditSpentNow } from '@ent/common/db/credit-columns';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { meteredPeriodAt } from '@ent/common/metering/metered-period';
import { creditBalanceDirtyMember, creditDirtyMember, meteredMember } from '@ent/common/redis/keys';
import {
  ManualClock,
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { meteredPersisterDeps } from '../../../test-support/metered-persister.ts';
import { caller } from '../../../test-support/identity-context.ts';
import { raiseExpiredCredits } from '../../src/features/credits/expiry.job.ts';
import { foldSettledCreditFigures } from '../../src/features/credits/worker/fold.ts';
import { refillFigures } from '../../src/features/metered-usage/open-balances.ts';
import {
  createMeteredPersister,
  type MeteredPersisterDeps,
} from '../../src/features/metered-usage/persister.ts';
import { changeBalance, meteredSubscriber } from '../metered-usage/balances.ts';

const NOW = Date.parse('2027-03-15T12:00:00.000Z');
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

let ctx: AdminTestContext;
let deps: MeteredPersisterDeps;
let org: TestOrganization;
const clock = new ManualClock(NOW);

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  deps = meteredPersisterDeps(ctx);
});
// An organization of its own per case, with a webhook, and alice on a plan granting api-calls (100 a month).
beforeEach(async () => {
  clock.set(NOW);
  org = await createTestOrganization(ctx.db, 'Credits worker');
  const webhook = await caller(ctx, org.api_key).put('/org/webhook', { url: 'http://127.0.0.1:9/hooks' });
  expect(webhook.statusCode).toBe(201);
  await meteredSubscriber(ctx, org, { subscriberId: 'alice', feature: 'api-calls', limit: 100 });
});
afterAll(async () => {
  await ctx?.close();
});

const api = () => caller(ctx, org.api_key);
const thisMonth = meteredPeriodAt('month', null, NOW);
/** alice's api-calls balance of NOW's month. */
const alice = {
  subscriberId: 'alice',
  feature: 'api-calls',
  periodStartMs: thisMonth.startMs,
  periodEndMs: thisMonth.endMs,
};
const keys = () => ctx.app.redisKeys;
const createCredit = async (payload: object): Promise<string> => {
  const res = await api().post('/org/subscribers/alice/credits', payload);
  expect(res.statusCode, res.body).toBe(201);
  return res.json().credit_id as string;
};
const persistedSpent = async (creditId: string) =>
  (
    await ctx.db
      .selectFrom('credits as c')
      .select(creditSpentNow)
      .where('c.organization_id', '=', org.organization_id)
      .where('c.id', '=', creditId)
      .executeTakeFirstOrThrow()
  ).spent;
/** What the gateway's Lua leaves after spending from credits: the figures, the member dirty, the org dirty. */
const spendInRedis = async (figures: Record<string, number | string>) => {
  await ctx.redis.hset(keys().creditSpent(org.organization_id, 'alice', 'api-calls'), figures);
  await ctx.redis.sadd(keys().meteredDirty(org.organization_id), creditDirtyMember('alice', 'api-calls'));
  await ctx.redis.sadd(keys().meteredDirtyOrganizations, org.organization_id);
};
const events = async (type: string) => {
  const rows = await ctx.db
    .selectFrom('webhook_deliveries')
    .select('payload')
    .where('organization_id', '=', org.organization_id)
    .where('event_type', '=', type)
    .orderBy('id')
    .execute();
  return rows.map(
    (row) => (JSON.parse(row.payload) as { data: { credit: Record<string, unknown> } }).data.credit,
  );
};

describe('credit spent from the dirty set', () => {
  it('persists each credit spent figure, newest figure last, and leaves the dirty set empty', async () => {
    const a = await createCredit({ feature: 'api-calls', amount: 10 });
    const b = await createCredit({ feature: 'api-calls', amount: 20, priority: 1 });
    await spendInRedis({ [a]: 3, [b]: 20 });
    const first = await createMeteredPersister(deps).persistOnce();
    expect(first).toMatchObject({ failed: 0, credits: 2 });
    expect([await persistedSpent(a), await persistedSpent(b)]).toEqual([3, 20]);
    await spendInRedis({ [a]: 1 }); // a negative delta gave some back
    await createMeteredPersister(deps).persistOnce();
    expect(await persistedSpent(a)).toBe(1);
    expect(await ctx.redis.scard(keys().meteredDirty(org.organization_id))).toBe(0);
  });

  it('a balance is never persisted ahead of its credits: one drain at a time, whatever SPOP takes first', async () => {
    const credit = await createCredit({ feature: 'api-calls', amount: 10 });
    // A give-back: used and k back to 0, the credit's spent down from 6 to 0 in the same call.
    await spendInRedis({ [credit]: 6 });
    await createMeteredPersister(deps).persistOnce();
    expect(await persistedSpent(credit)).toBe(6);
    const member = await changeBalance(ctx.redis, keys(), org.organization_id, alice, {
      used: 0,
      revision: 9,
    });
    await ctx.redis.hset(keys().meteredBalance(org.organization_id, member), 'k', 0);
    await spendInRedis({ [credit]: 0 });
    const persister = createMeteredPersister(deps, { batchSize: 1, maxBatches: 1 });
    for (
      let pass = 0;
      pass < 4 && (await ctx.redis.scard(keys().meteredDirty(org.organization_id))) > 0;
      pass++
    ) {
      await persister.persistOnce();
      const row = await ctx.db
        .selectFrom('metered_usage')
        .select('revision')
        .where('organization_id', '=', org.organization_id)
        .executeTakeFirst();
      if (row) expect(await persistedSpent(credit)).toBe(0);
    }
    expect(await ctx.redis.scard(keys().meteredDirty(org.organization_id))).toBe(0);
    expect(await persistedSpent(credit)).toBe(0);
  });

  it('voiding keeps what was spent, in Postgres and in the answers', async () => {
    const credit = await createCredit({ feature: 'api-calls', amount: 10 });
    await spendInRedis({ [credit]: 6 });
    await createMeteredPersister(deps).persistOnce();
    const voided = await api().delete(`/org/subscribers/alice/credits/${credit}`);
    expect(voided.statusCode).toBe(200);
    expect(voided.json()).toMatchObject({ status: 'voided', spent: 6, remaining: 0 });
    expect(await persistedSpent(credit)).toBe(6);
    // Without Redis's figure (Redis came back empty) the answer is Postgres's.
    await ctx.redis.del(keys().creditSpent(org.organization_id, 'alice', 'api-calls'));
    const listed = await api().get('/org/subscribers/alice/credits');
    expect(listed.json().credits[0]).toMatchObject({ credit_id: credit, spent: 6, status: 'voided' });
  });
});

describe("a credit's spent persisted in its balance's row", () => {
  /** What a consume that spent credits leaves: the balance with k, the figures, the balance named with its hash. */
  const spendWithBalance = async (figures: Record<string, number>, used: number, revision: number) => {
    const member = await changeBalance(ctx.redis, keys(), org.organization_id, alice, { used, revision });
    await ctx.redis.srem(keys().meteredDirty(org.organization_id), member);
    await ctx.redis.hset(keys().meteredBalance(org.organization_id, member), 'k', used);
    await ctx.redis.hset(keys().creditSpent(org.organization_id, 'alice', 'api-calls'), figures);
    await ctx.redis.sadd(keys().meteredDirty(org.organization_id), creditBalanceDirtyMember(member));
    return member;
  };
  const rowOf = () =>
    ctx.db
      .selectFrom('metered_usage')
      .select(['used', 'covered', 'credit_spent', 'credit_spent_seq'])
      .where('organization_id', '=', org.organization_id)
      .executeTakeFirstOrThrow();
  const columnSpent = async (creditId: string) =>
    await ctx.db
      .selectFrom('credits')
      .select(['spent', 'spent_seq'])
      .where('organization_id', '=', org.organization_id)
      .where('id', '=', creditId)
      .executeTakeFirstOrThrow();

  it('writes the figures into the balance row only, and the latest write wins whichever row holds it', async () => {
    const a = await createCredit({ feature: 'api-calls', amount: 10 });
    const b = await createCredit({ feature: 'api-calls', amount: 20 });
    await spendWithBalance({ [a]: 4 }, 4, 3);
    expect((await createMeteredPersister(deps).persistOnce()).failed).toBe(0);
    const first = await rowOf();
    expect(first).toMatchObject({ used: 4, covered: 4, credit_spent: { [a]: 4 } });
    expect(first.credit_spent_seq).toBeGreaterThan(0);
    // The credit's own row is not written: one row per drained balance, as without credits.
    expect(await columnSpent(a)).toEqual({ spent: 0, spent_seq: 0 });
    expect([await persistedSpent(a), await persistedSpent(b)]).toEqual([4, 0]);

    // A write that moved spent without the balance (a correction's give-back): written to the credit, newer.
    await spendInRedis({ [a]: 1, [b]: 2 });
    await createMeteredPersister(deps).persistOnce();
    expect((await columnSpent(a)).spent_seq).toBeGreaterThan(first.credit_spent_seq!);
    expect([await persistedSpent(a), await persistedSpent(b)]).toEqual([1, 2]);

    // Spending again through the balance: its row is the latest again.
    await spendWithBalance({ [a]: 9, [b]: 2 }, 11, 4);
    await createMeteredPersister(deps).persistOnce();
    expect(await rowOf()).toMatchObject({ used: 11, credit_spent: { [a]: 9, [b]: 2 } });
    expect([await persistedSpent(a), await persistedSpent(b)]).toEqual([9, 2]);
    expect(await ctx.redis.scard(keys().meteredDirty(org.organization_id))).toBe(0);
  });

  it('a later drain of the balance without its hash keeps the figures its row holds', async () => {
    const a = await createCredit({ feature: 'api-calls', amount: 10 });
    await spendWithBalance({ [a]: 5 }, 5, 2);
    await createMeteredPersister(deps).persistOnce();
    // Everything given back (k gone from the hash, as a refill leaves it), then a plain change of the balance.
    const member = await changeBalance(ctx.redis, keys(), org.organization_id, alice, {
      used: 7,
      revision: 3,
    });
    await ctx.redis.hdel(keys().meteredBalance(org.organization_id, member), 'k');
    await createMeteredPersister(deps).persistOnce();
    expect(await rowOf()).toMatchObject({ used: 7, credit_spent: { [a]: 5 } });
    expect(await persistedSpent(a)).toBe(5);
  });

  it('the sweep folds rows no drain can write again into the credits, each figure only forward', async () => {
    const a = await createCredit({ feature: 'api-calls', amount: 50 });
    const b = await createCredit({ feature: 'api-calls', amount: 50 });
    const row = (monthsBack: number, figures: Record<string, number>, seq: number) => {
      const start = meteredPeriodAt('month', null, NOW - monthsBack * 31 * 86_400_000);
      return {
        organization_id: org.organization_id,
        subscriber_id: 'alice',
        feature_key: 'api-calls',
        period_start: new Date(start.startMs),
        period_end: new Date(start.endMs!),
        used: 1,
        revision: 1,
        credit_spent: JSON.stringify(figures),
        credit_spent_seq: seq,
      };
    };
    // Settled: January (seq 100), and December (seq 90) beyond the sweep's month; recent: February (seq 200, b only).
    await ctx.db
      .insertInto('metered_usage')
      .values([row(2, { [a]: 7, [b]: 1 }, 100), row(3, { [a]: 5 }, 90), row(1, { [b]: 9 }, 200)])
      .execute();
    await ctx.db
      .updateTable('credits')
      .set({ spent: 3, spent_seq: 95 })
      .where('organization_id', '=', org.organization_id)
      .where('id', '=', b)
      .execute();
    expect([await persistedSpent(a), await persistedSpent(b)]).toEqual([7, 9]);
    const cleared = await foldSettledCreditFigures(ctx.db, NOW);
    expect(cleared).toBe(1);
    // a: January's figure, the latest settled one; b: January's 1 (seq 100) passes its own 3 (seq 95), and February,
    // not settled, still holds the figure read.
    expect(await columnSpent(a)).toEqual({ spent: 7, spent_seq: 100 });
    expect(await columnSpent(b)).toEqual({ spent: 1, spent_seq: 100 });
    expect([await persistedSpent(a), await persistedSpent(b)]).toEqual([7, 9]);
    const left = await ctx.db
      .selectFrom('metered_usage')
      .select(['period_start', 'credit_spent'])
      .where('organization_id', '=', org.organization_id)
      .where('credit_spent', 'is not', null)
      .orderBy('period_start')
      .execute();
    // December, never folded, stays right: its figure is older than what a now holds.
    expect(left.map((entry) => entry.credit_spent)).toEqual([{ [a]: 5 }, { [b]: 9 }]);
  });

  it('voiding and expiry keep the figure in the credit itself, and a refill still puts it back', async () => {
    const voided = await createCredit({ feature: 'api-calls', amount: 10 });
    const expiring = await createCredit({
      feature: 'api-calls',
      amount: 10,
      expires_at: iso(NOW + HOUR),
    });
    await spendWithBalance({ [voided]: 6, [expiring]: 3 }, 9, 2);
    await createMeteredPersister(deps).persistOnce();
    const { credit_spent_seq: seq } = await rowOf();
    expect((await api().delete(`/org/subscribers/alice/credits/${voided}`)).statusCode).toBe(200);
    clock.set(NOW + 2 * HOUR);
    await raiseExpiredCredits({ ...deps, redisKeyPrefix: ctx.app.config.redisKeyPrefix });
    // At the sequence of the row they came from: a later drain's figure still passes them.
    expect(await columnSpent(voided)).toEqual({ spent: 6, spent_seq: seq });
    expect(await columnSpent(expiring)).toEqual({ spent: 3, spent_seq: seq });
    // Redis comes back empty: the refill puts both back (they may still be named by rows of balances in Redis).
    const refill = await refillFigures(ctx.db, org.organization_id, new Date(NOW + 2 * HOUR));
    expect(refill.credits.map((credit) => [credit.credit_id, credit.spent]).sort()).toEqual(
      [
        [voided, 6],
        [expiring, 3],
      ].sort(),
    );
    // A hash without them (put back from an older refill) drops them from the row: the credits keep their figures.
    await ctx.redis.del(keys().creditSpent(org.organization_id, 'alice', 'api-calls'));
    await spendWithBalance({ other: 1 }, 9, 3);
    await createMeteredPersister(deps).persistOnce();
    expect((await rowOf()).credit_spent).toEqual({ other: 1 });
    expect([await persistedSpent(voided), await persistedSpent(expiring)]).toEqual([6, 3]);
  });

  it("a balance gone from Redis leaves its hash's figures to the credits", async () => {
    const a = await createCredit({ feature: 'api-calls', amount: 10 });
    const member = await spendWithBalance({ [a]: 6 }, 6, 2);
    await ctx.redis.del(keys().meteredBalance(org.organization_id, member));
    await createMeteredPersister(deps).persistOnce();
    expect(await columnSpent(a)).toMatchObject({ spent: 6 });
    expect(await persistedSpent(a)).toBe(6);
  });
});

describe('rollover credits made by the gateway', () => {
  const march = meteredPeriodAt('month', null, Date.parse('2027-03-10T00:00:00Z'));
  const april = meteredPeriodAt('month', null, Date.parse('2027-04-10T00:00:00Z'));
  // The id the gateway's Lua gives April's rollover (decisions.md, "Credits on the gateway").
  const rolloverId = `cr_ro_${april.startMs}_${createHash('sha1').update('alice|api-calls').digest('hex').slice(0, 16)}`;
  /** What the Lua call that first touched April leaves: the record for the worker, beside any spent figure. */
  const rolloverRecord = (amount: number) => ({
    [`ro:${rolloverId}`]: `${amount}|${march.startMs}|${april.startMs}|${april.endMs}`,
  });

  it('records the rollover once with credit.created, however many persists race', async () => {
    clock.set(Date.parse('2027-04-10T00:00:00Z'));
    await spendInRedis({ ...rolloverRecord(40), [rolloverId]: 5 });
    await Promise.all(Array.from({ length: 4 }, () => createMeteredPersister(deps).persistOnce()));
    // A later pass sees the record again (it stays in the hash) and records nothing more.
    await spendInRedis({ [rolloverId]: 6 });
    await createMeteredPersister(deps).persistOnce();
    const rows = await ctx.db
      .selectFrom('credits')
      .selectAll()
      .where('organization_id', '=', org.organization_id)
      .execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      id: rolloverId,
      amount: 40,
      spent: 6,
      priority: 10,
      source: 'rollover',
      effective_at: new Date(april.startMs),
      expires_at: new Date(april.endMs!),
      source_period_start: new Date(march.startMs),
      created_at: new Date(april.startMs),
    });
    const created = await events('credit.created');
    expect(created).toHaveLength(1);
    expect(created[0]).toMatchObject({ credit_id: rolloverId, source: 'rollover', amount: 40 });
    const listed = await api().get('/org/subscribers/alice/credits');
    expect(listed.json().credits).toEqual([
      expect.objectContaining({
        credit_id: rolloverId,
        source: 'rollover',
        spent: 6,
        remaining: 34,
        status: 'active',
      }),
    ]);
    // Visible and voidable like any credit; what it spent stays spent, and the balance's ro goes to 0 so the
    // gateway cannot spend the implicit credit once the snapshot stops listing it.
    const balance = keys().meteredBalance(
      org.organization_id,
      meteredMember('alice', 'api-calls', april.startMs),
    );
    await ctx.redis.hset(balance, { u: 46, k: 6, ro: 40, r: 3, e: april.endMs! });
    const voided = await api().delete(`/org/subscribers/alice/credits/${rolloverId}`);
    expect(voided.json()).toMatchObject({ status: 'voided', spent: 6, remaining: 0 });
    expect(await ctx.redis.hmget(balance, 'u', 'k', 'ro')).toEqual(['46', '6', '0']);
  });

  it('records nothing for a malformed or empty record', async () => {
    await spendInRedis({
      [`ro:${rolloverId}`]: `0|${march.startMs}|${april.startMs}|${april.endMs}`,
      'ro:cr_ro_x': 'junk',
    });
    expect((await createMeteredPersister(deps).persistOnce()).failed).toBe(0);
    expect(
      await ctx.db
        .selectFrom('credits')
        .select('id')
        .where('organization_id', '=', org.organization_id)
        .execute(),
    ).toEqual([]);
  });
});

describe('credit.expired', () => {
  const run = () => raiseExpiredCredits({ ...deps, redisKeyPrefix: ctx.config.redisKeyPrefix });

  it('is raised once per credit when its expiry passes, not for voided or unexpired ones', async () => {
    const expiring = await createCredit({ feature: 'api-calls', amount: 10, expires_at: iso(NOW + HOUR) });
    const voided = await createCredit({ feature: 'api-calls', amount: 10, expires_at: iso(NOW + HOUR) });
    await createCredit({ feature: 'api-calls', amount: 10, expires_at: iso(NOW + 3 * HOUR) });
    expect((await api().delete(`/org/subscribers/alice/credits/${voided}`)).statusCode).toBe(200);
    await spendInRedis({ [expiring]: 4 });
    expect((await run()).expired).toBe(0);
    clock.set(NOW + 2 * HOUR);
    const [first, second] = await Promise.all([run(), run()]);
    expect(first.expired + second.expired).toBeGreaterThanOrEqual(1);
    await run();
    const expired = await events('credit.expired');
    expect(expired.map((credit) => credit.credit_id)).toEqual([expiring]);
    expect(expired[0]).toMatchObject({ status: 'expired', spent: 4, remaining: 0 });
  });
});
