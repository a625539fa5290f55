import { describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import type { CatalogDoc, SubscriberDoc } from '@ent/common/snapshots/documents';
import type { PersistedBalance } from '../../src/metering/metered-balances.ts';
import {
  gateOperationArguments,
  meteredOperation,
  type MeteredKind,
} from '../../src/metering/metered-operations.ts';
import {
  meteringTestRedis,
  openEvalMeter,
  unpersistedBalances,
  seededOrganizations,
} from '../../../test-support/metering-redis.ts';

const { keys, redis } = meteringTestRedis();
const clock = new ManualClock(Date.parse('2026-03-10T12:00:00Z'));
let persisted: PersistedBalance[] = [];

const catalog: CatalogDoc = {
  features: { calls: 'metered', soft: 'metered', open: 'metered', sso: 'flag' },
  plans: {
    pro: {
      archived: false,
      grants: {
        calls: { kind: 'metered', limit: 10, reset: 'month', anchor: 'calendar', soft: false },
        soft: { kind: 'metered', limit: 2, reset: 'day', anchor: 'calendar', soft: true },
        open: { kind: 'metered', limit: null, reset: 'never', anchor: 'calendar', soft: false },
        sso: { kind: 'flag' },
      },
    },
  },
} as unknown as CatalogDoc;
const alice: SubscriberDoc = { exists: true, plans: ['pro'], overrides: {} };

/** A fresh organization with the catalog (version 3) and alice (version 5) in Redis; ready unless asked. */
const organization = seededOrganizations({ redis, keys, catalog, subscribers: { alice } });

const balances = () =>
  unpersistedBalances({
    redis,
    keys,
    clock,
    loadBalances: async () => ({ balances: persisted, credits: [] }),
    refillGatherMs: 0,
  });

const op = (
  kind: MeteredKind,
  feature: string,
  amount: number,
  idem = '',
  versions = { catalog: 3, subscriber: 5 },
) =>
  meteredOperation(
    { catalog, subscriber: alice, catalogVersion: versions.catalog, subscriberVersion: versions.subscriber },
    'alice',
    feature,
    kind,
    amount,
    clock.now(),
    idem,
    keys,
    'org_unused',
  );

describe('the metered balance rule (metered-balance.fragment.lua, through usage-apply-6.lua)', () => {
  it('consumes while it fits a hard limit, refuses what does not fit and changes nothing then', async () => {
    const org = await organization();
    const meter = balances();
    const outcomes = await meter.apply(org, [op('c', 'calls', 4), op('c', 'calls', 6), op('c', 'calls', 1)]);
    expect(outcomes).toEqual([
      { status: 'applied', used: 4 },
      { status: 'applied', used: 10 },
      { status: 'refused', used: 10 },
    ]);
    const member = op('r', 'calls', 0).member;
    expect(await redis.hgetall(keys.meteredBalance(org, member))).toMatchObject({ u: '10', r: '2' });
    expect(await redis.smembers(keys.meteredDirty(org))).toEqual([member]);
    // The period ends on 1 April; the balance lives 35 days past it, on the app's clock.
    const ttl = await redis.pttl(keys.meteredBalance(org, member));
    const expected = Date.parse('2026-04-01T00:00:00Z') + 35 * 86_400_000 - clock.now();
    expect(ttl).toBeGreaterThan(expected - 60_000);
    expect(ttl).toBeLessThanOrEqual(expected);
  });

  it('lets soft and unlimited limits go past, keeps "never" balances forever, and never goes below 0', async () => {
    const org = await organization();
    const meter = balances();
    expect(await meter.apply(org, [op('c', 'soft', 5), op('c', 'open', 1e9), op('d', 'calls', -3)])).toEqual([
      { status: 'applied', used: 5 },
      { status: 'applied', used: 1e9 },
      { status: 'applied', used: 0 },
    ]);
    expect(await redis.pttl(keys.meteredBalance(org, op('r', 'open', 0).member))).toBe(-1);
    expect(
      await meter.apply(org, [
        op('d', 'calls', 7),
        op('d', 'calls', -2),
        op('s', 'calls', 3),
        op('r', 'calls', 0),
      ]),
    ).toEqual([
      { status: 'applied', used: 7 },
      { status: 'applied', used: 5 },
      { status: 'applied', used: 3 },
      { status: 'applied', used: 3 },
    ]);
  });

  it('refuses an operation resolved from versions that are no longer current, applying nothing', async () => {
    const org = await organization();
    const meter = balances();
    const outcomes = await meter.apply(org, [
      op('c', 'calls', 1, '', { catalog: 2, subscriber: 5 }),
      op('c', 'calls', 1, '', { catalog: 3, subscriber: 4 }),
    ]);
    expect(outcomes).toEqual([{ status: 'stale' }, { status: 'stale' }]);
    expect(await redis.exists(keys.meteredBalance(org, op('r', 'calls', 0).member))).toBe(0);
  });

  it('replays the first answer for a repeated idempotency key and refuses the key for another request', async () => {
    const org = await organization();
    const meter = balances();
    const [first] = await meter.apply(org, [op('c', 'calls', 9, 'k1')]);
    expect(first).toEqual({ status: 'applied', used: 9 });
    await meter.apply(org, [op('s', 'calls', 1)]);
    const [replay] = await meter.apply(org, [op('c', 'calls', 9, 'k1')]);
    expect(replay).toMatchObject({ status: 'replayed', answer: { used: 9, remaining: 1, allowed: true } });
    expect(await meter.apply(org, [op('c', 'calls', 8, 'k1'), op('r', 'calls', 0)])).toEqual([
      { status: 'key_reused' },
      { status: 'applied', used: 1 },
    ]);
    expect(await redis.pttl(keys.usageIdempotency(org, 'k1'))).toBeGreaterThan(86_000_000);
  });

  it('answers "not ready" without the marker; a refill puts back the largest known figure, then applies', async () => {
    const org = await organization({ ready: false });
    const member = op('r', 'calls', 0).member;
    persisted = [
      {
        subscriberId: 'alice',
        feature: 'calls',
        periodStartMs: Date.parse('2026-03-01T00:00:00Z'),
        periodEndMs: Date.parse('2026-04-01T00:00:00Z'),
        used: 6,
        revision: 40,
      },
    ];
    const meter = balances();
    const [outcome] = await meter.apply(org, [op('c', 'calls', 3)]);
    // Refilled to 6 (revision past the persisted 40), then the consume applied on top.
    expect(outcome).toEqual({ status: 'applied', used: 9 });
    persisted = [];
    expect(await redis.hgetall(keys.meteredBalance(org, member))).toMatchObject({ u: '9', r: '42' });
    expect(await redis.get(keys.meteredReady(org))).toBe('1');
    expect(await meter.apply(org, [op('c', 'calls', 1)])).toEqual([{ status: 'applied', used: 10 }]);

    // Redis loses everything: the gateway's own last figure (10) beats Postgres's older one (6).
    persisted = [
      {
        subscriberId: 'alice',
        feature: 'calls',
        periodStartMs: Date.parse('2026-03-01T00:00:00Z'),
        periodEndMs: Date.parse('2026-04-01T00:00:00Z'),
        used: 6,
        revision: 41,
      },
    ];
    await redis.del(keys.meteredReady(org), keys.meteredBalance(org, member));
    expect(await meter.apply(org, [op('r', 'calls', 0)])).toEqual([{ status: 'applied', used: 10 }]);
    persisted = [];
  });
});

describe('metered operations in the gate call (eval-gate-batch-8.lua)', () => {
  const gateMeter = () => openEvalMeter({ redis, keys });
  const gate = (meter: ReturnType<typeof gateMeter>, org: string, ops: ReturnType<typeof op>[]) =>
    meter.gate({ organizationId: org, subscriberId: 'alice', nowMs: clock.now(), metered: ops });

  it('applies the operations of counted evals in the same call, in order', async () => {
    const org = await organization();
    const meter = gateMeter();
    const results = await Promise.all([
      gate(meter, org, [op('c', 'calls', 7)]),
      gate(meter, org, [op('c', 'calls', 7)]),
      meter.gate({ organizationId: org, subscriberId: 'alice', nowMs: clock.now() }),
      gate(meter, org, [op('r', 'calls', 0), op('c', 'calls', 3)]),
    ]);
    expect(results.map((result) => result.outcome)).toEqual(['counted', 'counted', 'counted', 'counted']);
    expect(results.map((result) => (result.outcome === 'counted' ? result.metered : null))).toEqual([
      [{ status: 'applied', used: 7 }],
      [{ status: 'refused', used: 7 }],
      undefined,
      [
        { status: 'applied', used: 7 },
        { status: 'applied', used: 10 },
      ],
    ]);
  });

  it('changes a balance with one revision per change, marks every changed member dirty, and sets its expiry once', async () => {
    const org = await organization();
    const meter = gateMeter();
    const member = op('r', 'calls', 0).member;
    const soft = op('r', 'soft', 0).member;
    await Promise.all([
      gate(meter, org, [op('c', 'calls', 2)]),
      gate(meter, org, [op('c', 'calls', 1), op('c', 'soft', 1)]),
      gate(meter, org, [op('r', 'calls', 0)]),
    ]);
    expect(await redis.hgetall(keys.meteredBalance(org, member))).toEqual({
      u: '3',
      r: '2',
      e: String(Date.parse('2026-04-01T00:00:00Z')),
    });
    expect((await redis.smembers(keys.meteredDirty(org))).sort()).toEqual([member, soft].sort());
    // The expiry is the period's end plus 35 days, the same instant on every change: set with the hash, not again.
    const ttl = Date.parse('2026-04-01T00:00:00Z') + 35 * 86_400_000 - clock.now();
    expect(await redis.pttl(keys.meteredBalance(org, member))).toBeGreaterThan(ttl - 60_000);
    await redis.pexpire(keys.meteredBalance(org, member), 5_000_000_000);
    await gate(meter, org, [op('c', 'calls', 1)]);
    expect(await redis.pttl(keys.meteredBalance(org, member))).toBeGreaterThan(4_000_000_000);
    // A balance whose period end moved (another reset starting at the same instant) gets the new end and expiry.
    const moved = {
      ...op('c', 'calls', 1),
      periodEndMs: Date.parse('2026-03-02T00:00:00Z'),
      ttlMs: 1_000_000,
    };
    await gate(meter, org, [moved]);
    expect(await redis.hmget(keys.meteredBalance(org, member), 'u', 'r', 'e')).toEqual([
      '5',
      '4',
      String(Date.parse('2026-03-02T00:00:00Z')),
    ]);
    expect(await redis.pttl(keys.meteredBalance(org, member))).toBeLessThanOrEqual(1_000_000);
  });

  it('sends what operations on one period of one feature share once, and answers each as if sent alone', async () => {
    const org = await organization();
    const meter = gateMeter();
    const [first, second, third] = [op('c', 'calls', 2), op('c', 'soft', 1), op('c', 'calls', 3, 'k1')];
    const stale = op('c', 'calls', 1, '', { catalog: 2, subscriber: 5 });
    const evals = [[first, second], [stale], [third, op('r', 'calls', 0)]].map((metered) => ({
      subscriberId: 'alice',
      metered,
    }));
    // Term sets: calls (catalog 3), soft, calls under catalog 2; then 7 values each. The keyed consume shares the first:
    // without credits its rendering terms are the plain ones every operation on the period sends.
    const args = gateOperationArguments(evals);
    expect(third.terms).toBe(first.terms);
    expect(args.slice(0, 8)).toEqual([
      3,
      3,
      `|calls|${first.period.startMs}`,
      10,
      '0',
      first.periodEndMs,
      first.ttlMs,
      first.terms,
    ]);
    // No credit specs (0), the kinds (upper case: keyed), then 5 values per operation, the last naming no spec, and
    // the keyed one's key and fingerprint.
    expect(args.slice(1 + 3 * 7)).toEqual([
      0,
      'cccCr',
      ...[1, 1, 2, 5, 0],
      ...[1, 2, 1, 5, 0],
      ...[2, 3, 1, 5, 0],
      ...[3, 1, 3, 5, 0, 'k1', third.fingerprint],
      ...[3, 1, 0, 5, 0],
    ]);
    const results = await Promise.all(evals.map(({ metered }) => gate(meter, org, metered)));
    expect(results.map((result) => (result.outcome === 'counted' ? result.metered : null))).toEqual([
      [
        { status: 'applied', used: 2 },
        { status: 'applied', used: 1 },
      ],
      [{ status: 'stale' }],
      [
        { status: 'applied', used: 5 },
        { status: 'applied', used: 5 },
      ],
    ]);
    expect(
      await redis.hmget(keys.meteredBalance(org, `alice|calls|${first.period.startMs}`), 'u', 'r'),
    ).toEqual(['5', '2']);
    const [replayed] = await gate(meter, org, [op('c', 'calls', 3, 'k1')]).then((result) =>
      result.outcome === 'counted' ? result.metered! : [],
    );
    expect(replayed).toMatchObject({ status: 'replayed', answer: { used: 5, limit: 10, allowed: true } });
  });

  it("refuses to send an operation in another subscriber's eval", () => {
    expect(() => gateOperationArguments([{ subscriberId: 'bob', metered: [op('c', 'calls', 1)] }])).toThrow(
      /another subscriber/,
    );
  });

  it('refuses stale versions and a missing readiness marker, and skips the operations of evals not counted', async () => {
    const org = await organization({ ready: false, burstPerSecond: 1 });
    const meter = gateMeter();
    const [first, second] = await Promise.all([
      gate(meter, org, [op('c', 'calls', 1)]),
      gate(meter, org, [op('c', 'calls', 1)]),
    ]);
    expect(first).toMatchObject({ outcome: 'counted', metered: [{ status: 'not_ready' }] });
    expect(second.outcome).toBe('rate_limited');
    await redis.set(keys.meteredReady(org), '1');
    clock.advance(2000);
    const stale = await gate(meter, org, [op('c', 'calls', 1, '', { catalog: 3, subscriber: 6 })]);
    expect(stale).toMatchObject({ outcome: 'counted', metered: [{ status: 'stale' }] });
    expect(await redis.exists(keys.meteredBalance(org, op('r', 'calls', 0).member))).toBe(0);
  });
});
