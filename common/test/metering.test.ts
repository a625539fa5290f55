import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock, toTimestamp } from '@ent/common/clock';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { redisKeys, type RedisKeys } from '@ent/common/redis/keys';
import {
  publishArrangement,
  SELF_SERVE_ARRANGEMENT,
  type Arrangement,
} from '@ent/common/metering/arrangement';
import type { EvalGateResult, EvalMeter, VerifiedSubscriber } from '../../gateway/src/metering/contract.ts';
import { createEvalMeter } from '../../gateway/src/metering/meter.ts';
import { GRACE_PERIOD_MS, usageTtlMs } from '@ent/common/metering/period';
import { currentUsage } from '@ent/common/metering/usage';
import { snapshotStore } from '@ent/common/snapshots/store';
import type { SubscriberDoc } from '@ent/common/snapshots/documents';
import { deleteKeys } from '../../test-support/redis-keys.ts';
import { redisCluster, singleRedis } from '../../test-support/redis-setups.ts';

const SECOND = 1000;
const DAY = 24 * 60 * 60 * SECOND;
const at = (iso: string) => Date.parse(iso);

describe.each([singleRedis, redisCluster])('eval meter on $name', (setup) => {
  let stopRedis: () => Promise<void>;
  let redis: RedisClient;
  let otherRedis: RedisClient;
  let keys: RedisKeys;
  let meter: EvalMeter;
  let otherMeter: EvalMeter;
  let clock: ManualClock;
  const sourceOfTruth = new Map<string, Arrangement>();
  const loads: string[] = [];
  const prefix = `t${randomBytes(5).toString('hex')}`;

  beforeAll(async () => {
    const started = await setup.start();
    stopRedis = started.stop;
    redis = createRedis(started.config);
    otherRedis = createRedis(started.config);
    keys = redisKeys(prefix);
    const loadArrangement = async (organizationId: string) => {
      loads.push(organizationId);
      return sourceOfTruth.get(organizationId) ?? SELF_SERVE_ARRANGEMENT;
    };
    meter = createEvalMeter({ redis, keys, loadArrangement });
    otherMeter = createEvalMeter({ redis: otherRedis, keys, loadArrangement });
  });

  afterAll(async () => {
    if (redis && 'keys' in redis && !('nodes' in redis)) {
      await deleteKeys(redis, `${prefix}:*`);
    }
    redis?.disconnect();
    otherRedis?.disconnect();
    await stopRedis?.();
  });

  beforeEach(() => {
    clock = new ManualClock(at('2026-03-10T12:00:00.000Z'));
  });

  const newOrg = async (arrangement: Arrangement | null) => {
    const organizationId = `org_${randomBytes(6).toString('hex')}`;
    if (arrangement) {
      sourceOfTruth.set(organizationId, arrangement);
      await publishArrangement(redis, keys, organizationId, arrangement);
    }
    return organizationId;
  };
  /** The organization's subscriber-write stamp as Redis holds it (0: none). */
  const stampOf = async (org: string) => Number((await redis.hget(keys.subscriberVersions(org), '#w')) ?? 0);
  /** A subscriber snapshot written the way admin writes it (document and version index together). */
  const putSubscriber = (org: string, subscriberId: string, version: number) =>
    snapshotStore(redis, keys).putSubscriber(org, subscriberId, {
      version,
      doc: { exists: true, plans: [], overrides: {} } satisfies SubscriberDoc,
    });
  const individual = (overrides: Partial<Arrangement>): Arrangement => ({
    ...SELF_SERVE_ARRANGEMENT,
    burstPerSecond: 10_000,
    ...overrides,
  });
  const gate = (organizationId: string, nowMs = clock.now(), subscriberId = 'cus_1') =>
    meter.gate({ organizationId, subscriberId, nowMs });
  const gateTimes = async (organizationId: string, times: number) => {
    const results: EvalGateResult[] = [];
    for (let i = 0; i < times; i++) results.push(await gate(organizationId));
    return results;
  };
  const usageOf = (organizationId: string) =>
    currentUsage(
      redis,
      keys,
      organizationId,
      sourceOfTruth.get(organizationId) ?? SELF_SERVE_ARRANGEMENT,
      clock.now(),
    );
  const warnOf = (result: EvalGateResult) => (result.outcome === 'rate_limited' ? 'n/a' : result.usage?.warn);

  it('walks the whole state table of a blocking arrangement: 80%, 100%, grace, blocked, next month', async () => {
    const org = await newOrg(individual({ plan: 'free', evalLimit: 10, blocking: true }));

    const first = await gateTimes(org, 7);
    expect(first.map(warnOf)).toEqual([null, null, null, null, null, null, null]);
    expect(first[6]).toMatchObject({ outcome: 'counted', usage: { limit: 10, used: 7, warn: null } });
    expect(await usageOf(org)).toMatchObject({ count: 7, warn: null, first_over_at: null, blocked_at: null });

    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { used: 8, warn: '80' } });
    expect(await usageOf(org)).toMatchObject({ warn: '80', allowed: true, first_over_at: null });
    expect(await gate(org)).toMatchObject({ usage: { used: 9, warn: '80' } });

    clock.advance(1234);
    const firstOverAt = clock.now();
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { used: 10, warn: '100' } });
    expect(await usageOf(org)).toEqual({
      gated: true,
      reason: null,
      period: '2026-03',
      count: 10,
      limit: 10,
      plan: 'free',
      blocking: true,
      warn: '100',
      allowed: true,
      first_over_at: toTimestamp(firstOverAt),
      blocked_at: toTimestamp(firstOverAt + GRACE_PERIOD_MS),
    });

    clock.advance(SECOND);
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { used: 11, warn: 'grace' } });
    expect(await usageOf(org)).toMatchObject({
      warn: '100',
      allowed: true,
      first_over_at: toTimestamp(firstOverAt),
    });

    clock.set(firstOverAt + GRACE_PERIOD_MS - 1);
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { used: 12, warn: 'grace' } });

    clock.set(firstOverAt + GRACE_PERIOD_MS);
    const blocked = await gate(org);
    expect(blocked).toEqual({
      outcome: 'blocked',
      period: '2026-03',
      versions: { catalog: 0, subscriber: 0, auth: 0, subscriberStamp: 0 },
      usage: { limit: 10, used: 12, warn: 'grace', blocking: true },
    });
    expect(await usageOf(org)).toMatchObject({
      count: 12,
      warn: 'grace',
      allowed: false,
      first_over_at: toTimestamp(firstOverAt),
      blocked_at: toTimestamp(firstOverAt + GRACE_PERIOD_MS),
    });

    clock.set(at('2026-03-31T23:59:59.999Z'));
    expect((await gate(org)).outcome).toBe('blocked');
    expect((await usageOf(org)).count).toBe(12);

    clock.set(at('2026-04-01T00:00:00.000Z'));
    expect(await usageOf(org)).toMatchObject({
      period: '2026-04',
      count: 0,
      warn: null,
      allowed: true,
      first_over_at: null,
    });
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { limit: 10, used: 1, warn: null } });
    expect(await usageOf(org)).toMatchObject({
      period: '2026-04',
      count: 1,
      warn: null,
      allowed: true,
      blocked_at: null,
    });
  });

  it('keeps answering past the limit when non-blocking, with warn 100 and no blocked_at', async () => {
    const org = await newOrg(individual({ plan: 'partner', evalLimit: 5, blocking: false }));
    const results = await gateTimes(org, 7);
    expect(results.map(warnOf)).toEqual([null, null, null, '80', '100', '100', '100']);
    const firstOverAt = clock.now();

    clock.advance(20 * DAY);
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { limit: 5, used: 8, warn: '100' } });
    expect(await usageOf(org)).toEqual({
      gated: true,
      reason: null,
      period: '2026-03',
      count: 8,
      limit: 5,
      plan: 'partner',
      blocking: false,
      warn: '100',
      allowed: true,
      first_over_at: toTimestamp(firstOverAt),
      blocked_at: null,
    });
  });

  it('counts an unlimited organization without usage headers and reports it ungated', async () => {
    const org = await newOrg(individual({ plan: null, evalLimit: null, blocking: true }));
    const results = await gateTimes(org, 3);
    expect(results.every((r) => r.outcome === 'counted' && r.usage === null)).toBe(true);
    clock.set(at('2026-04-02T00:00:00.000Z'));
    expect(await usageOf(org)).toEqual({
      gated: false,
      reason: 'unlimited',
      period: '2026-04',
      count: 0,
      limit: null,
      plan: null,
      blocking: false,
      warn: null,
      allowed: true,
      first_over_at: null,
      blocked_at: null,
    });
    clock.set(at('2026-03-20T00:00:00.000Z'));
    expect(await usageOf(org)).toMatchObject({ gated: false, period: '2026-03', count: 3, warn: null });
  });

  it('loads and publishes a missing arrangement once, then reads it from Redis', async () => {
    const org = await newOrg(null);
    expect(await gate(org)).toMatchObject({
      outcome: 'counted',
      usage: { limit: 250_000, used: 1, warn: null },
    });
    expect(loads.filter((id) => id === org)).toHaveLength(1);
    expect(await redis.hgetall(keys.arrangement(org))).toEqual({
      limit: '250000',
      blocking: '1',
      burst: '100',
      plan: 'free',
      usage_eps: '1000',
    });
    await gate(org);
    expect(loads.filter((id) => id === org)).toHaveLength(1);
    expect(await usageOf(org)).toMatchObject({
      plan: 'free',
      count: 2,
      limit: 250_000,
      blocking: true,
      gated: true,
    });
  });

  it('applies an arrangement change on the next gate call', async () => {
    const org = await newOrg(individual({ evalLimit: 100 }));
    expect(await gate(org)).toMatchObject({ usage: { limit: 100, used: 1, warn: null } });
    await publishArrangement(redis, keys, org, individual({ evalLimit: 2, blocking: false }));
    expect(await gate(org)).toMatchObject({ usage: { limit: 2, used: 2, warn: '100' } });
    await publishArrangement(redis, keys, org, individual({ evalLimit: null }));
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: null });
  });

  it('unblocks at once when the limit is raised, and clears first_over_at', async () => {
    const org = await newOrg(individual({ evalLimit: 2 }));
    await gateTimes(org, 2);
    clock.advance(GRACE_PERIOD_MS);
    expect((await gate(org)).outcome).toBe('blocked');
    const raised = individual({ evalLimit: 100 });
    sourceOfTruth.set(org, raised);
    await publishArrangement(redis, keys, org, raised);
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { limit: 100, used: 3, warn: null } });
    expect(await redis.hget(keys.evalUsage(org, '2026-03'), 'first_over_at')).toBeNull();
    expect(await usageOf(org)).toMatchObject({ first_over_at: null, allowed: true });
  });

  it('a limit of 0 is reached the moment it is set: first_over_at and blocked_at before any eval', async () => {
    const zero = individual({ evalLimit: 0 });
    const org = await newOrg(null);
    sourceOfTruth.set(org, zero);
    await publishArrangement(redis, keys, org, zero, clock.now());
    expect(await usageOf(org)).toMatchObject({
      count: 0,
      warn: '100',
      first_over_at: toTimestamp(clock.now()),
      blocked_at: toTimestamp(clock.now() + GRACE_PERIOD_MS),
    });
    expect(await redis.pttl(keys.evalUsage(org, '2026-03'))).toBeGreaterThan(0);
    clock.advance(GRACE_PERIOD_MS);
    expect((await gate(org)).outcome).toBe('blocked');
  });

  it('counts N concurrent gate calls over two clients exactly N times', async () => {
    const org = await newOrg(individual({ evalLimit: 1_000_000 }));
    const n = 300;
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        (i % 2 ? meter : otherMeter).gate({
          organizationId: org,
          subscriberId: `cus_${i % 7}`,
          nowMs: clock.now(),
        }),
      ),
    );
    expect(results.every((r) => r.outcome === 'counted')).toBe(true);
    const used = results.map((r) => (r.outcome === 'counted' ? r.usage?.used : 0)).sort((a, b) => a! - b!);
    expect(used).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    expect((await usageOf(org)).count).toBe(n);
  });

  it('rate-limits a burst of 150 in one second to exactly 50 refusals, none counted', async () => {
    const org = await newOrg(individual({ evalLimit: 1_000, burstPerSecond: 100 }));
    clock.set(at('2026-03-10T12:00:05.250Z'));
    const results = await Promise.all(
      Array.from({ length: 150 }, (_, i) =>
        (i % 2 ? meter : otherMeter).gate({
          organizationId: org,
          subscriberId: 'cus_1',
          nowMs: clock.now() + (i % 700),
        }),
      ),
    );
    const limited = results.filter((r) => r.outcome === 'rate_limited');
    expect(limited).toHaveLength(50);
    expect(limited[0]).toMatchObject({
      retryAfterSeconds: 1,
      versions: { catalog: 0, subscriber: 0, auth: 0 },
    });
    expect((await usageOf(org)).count).toBe(100);
    clock.set(at('2026-03-10T12:00:06.000Z'));
    expect(await gate(org)).toMatchObject({ outcome: 'rate_limited' });
    clock.set(at('2026-03-10T12:00:06.950Z'));
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { used: 101 } });
  });

  it('holds the burst across a second boundary: a rolling second, not a calendar one', async () => {
    const org = await newOrg(individual({ evalLimit: 1_000, burstPerSecond: 100 }));
    const start = at('2026-03-10T12:00:05.800Z');
    const results = [];
    for (let i = 0; i < 150; i++) {
      results.push(await gate(org, start + Math.floor((i * 400) / 150)));
    }
    expect(results.filter((r) => r.outcome === 'counted')).toHaveLength(100);
    expect(results.slice(100).every((r) => r.outcome === 'rate_limited')).toBe(true);
    // The earliest admissions leave the window a second after their slot began.
    expect(await gate(org, at('2026-03-10T12:00:06.799Z'))).toMatchObject({ outcome: 'rate_limited' });
    expect(await gate(org, at('2026-03-10T12:00:06.800Z'))).toMatchObject({ outcome: 'counted' });
  });

  it('counts an eval that arrives out of time order in its own slot; one a window behind restarts the window', async () => {
    const org = await newOrg(individual({ evalLimit: 1_000, burstPerSecond: 2 }));
    const newest = at('2026-03-10T12:00:05.500Z');
    expect(await gate(org, newest)).toMatchObject({ outcome: 'counted' });
    // Half a second behind (another gateway's clock): inside the window, in its own slot.
    expect(await gate(org, newest - 500)).toMatchObject({ outcome: 'counted' });
    expect(await gate(org, newest - 100)).toMatchObject({ outcome: 'rate_limited' });
    // The late one's slot leaves the window first.
    expect(await gate(org, newest + 550)).toMatchObject({ outcome: 'counted' });
    expect(await gate(org, newest + 560)).toMatchObject({ outcome: 'rate_limited' });
    // A clock a whole window behind does not find it full of the future: the window restarts there.
    expect(await gate(org, newest - 3000)).toMatchObject({ outcome: 'counted' });
  });

  it('does not count rate-limited or blocked calls', async () => {
    const org = await newOrg(individual({ evalLimit: 3, burstPerSecond: 2 }));
    const sameSecond = await gateTimes(org, 4);
    expect(sameSecond.map((r) => r.outcome)).toEqual(['counted', 'counted', 'rate_limited', 'rate_limited']);
    clock.advance(SECOND);
    await gate(org);
    expect((await usageOf(org)).count).toBe(3);
    clock.advance(GRACE_PERIOD_MS);
    const blocked = [await gate(org), await gate(org, clock.now() + SECOND)];
    expect(blocked.map((r) => r.outcome)).toEqual(['blocked', 'blocked']);
    expect((await usageOf(org)).count).toBe(3);
  });

  it('refunds an eval, clearing first_over_at when the count falls back below the limit', async () => {
    const org = await newOrg(individual({ evalLimit: 5 }));
    await gateTimes(org, 5);
    expect((await usageOf(org)).first_over_at).toBe(toTimestamp(clock.now()));
    await meter.refund(org, clock.now());
    expect(await usageOf(org)).toMatchObject({ count: 4, first_over_at: null, warn: '80' });
    clock.advance(GRACE_PERIOD_MS);
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { used: 5, warn: '100' } });
    expect((await usageOf(org)).first_over_at).toBe(toTimestamp(clock.now()));
    for (let i = 0; i < 5; i++) await meter.refund(org, clock.now());
    expect((await usageOf(org)).count).toBe(0);
  });

  it('refunds into the month that counted the eval', async () => {
    const org = await newOrg(individual({ evalLimit: 10 }));
    const countedAt = at('2026-03-31T23:59:59.999Z');
    await gate(org, countedAt);
    clock.set(at('2026-04-01T00:00:00.001Z'));
    await gate(org);
    await meter.refund(org, countedAt);
    expect(await redis.hget(keys.evalUsage(org, '2026-03'), 'count')).toBe('0');
    expect((await usageOf(org)).count).toBe(1);
  });

  it('adds evals answered offline, with the same first_over_at rule', async () => {
    const org = await newOrg(individual({ evalLimit: 10 }));
    await meter.addOfflineCount(org, 4, clock.now());
    expect(await usageOf(org)).toMatchObject({ count: 4, first_over_at: null });
    await meter.addOfflineCount(org, 8, clock.now());
    expect(await usageOf(org)).toMatchObject({
      count: 12,
      warn: '100',
      first_over_at: toTimestamp(clock.now()),
    });
    expect(await gate(org)).toMatchObject({ usage: { used: 13, warn: 'grace' } });
  });

  it('returns the snapshot versions of catalog, subscriber and auth (0 when missing)', async () => {
    const org = await newOrg(individual({}));
    expect((await gate(org)).versions).toEqual({ catalog: 0, subscriber: 0, auth: 0, subscriberStamp: 0 });
    await redis.hset(keys.catalog(org), { v: '5', doc: '{}' });
    await putSubscriber(org, 'cus_9', 7);
    await redis.hset(keys.auth(org), { v: '3' });
    const stamp = await stampOf(org);
    expect(stamp).toBeGreaterThan(0);
    expect((await gate(org, clock.now(), 'cus_9')).versions).toEqual({
      catalog: 5,
      subscriber: 7,
      auth: 3,
      subscriberStamp: stamp,
    });
    expect((await gate(org, clock.now(), 'cus_other')).versions).toEqual({
      catalog: 5,
      subscriber: 0,
      auth: 3,
      subscriberStamp: stamp,
    });
  });

  describe('the subscriber-write stamp', () => {
    /** One eval, verified as the caller's cache would pass it. */
    const gateVerified = (org: string, subscriberId: string, verified?: VerifiedSubscriber) =>
      meter.gate({ organizationId: org, subscriberId, nowMs: clock.now(), verified });
    /** cus_1 at version 3 and cus_2 at 5, and the stamp a gate call saw after both were written. */
    const twoSubscribersAtStamp = async () => {
      const org = await newOrg(individual({}));
      await putSubscriber(org, 'cus_1', 3);
      await putSubscriber(org, 'cus_2', 5);
      return { org, stamp: (await gate(org, clock.now(), 'cus_1')).versions.subscriberStamp };
    };
    /** Changes the index behind the stamp's back: what a skipped read would have seen. */
    const rewriteIndexQuietly = (org: string, subscriberId: string, version: number) =>
      redis.hset(keys.subscriberVersions(org), subscriberId, String(version));

    it('moves with every subscriber write, and not with a write refused as older', async () => {
      const org = await newOrg(individual({}));
      await putSubscriber(org, 'cus_1', 3);
      const first = await stampOf(org);
      await putSubscriber(org, 'cus_2', 1);
      expect(await stampOf(org)).toBe(first + 1);
      await putSubscriber(org, 'cus_1', 2);
      expect(await stampOf(org)).toBe(first + 1);
      await putSubscriber(org, 'cus_1', 4);
      expect(await stampOf(org)).toBe(first + 2);
    });

    it('starts at a random value: a flushed index never hands out the stamps gateways saw before it', async () => {
      const starts = new Set<number>();
      const org = await newOrg(individual({}));
      for (let i = 0; i < 5; i++) {
        await redis.del(keys.subscriberVersions(org), keys.subscriber(org, 'cus_1'));
        await putSubscriber(org, 'cus_1', 1);
        starts.add(await stampOf(org));
      }
      expect(starts.size).toBe(5);
    });

    it('skips reading the versions verified at the current stamp, and reads every other one', async () => {
      const { org, stamp } = await twoSubscribersAtStamp();
      await rewriteIndexQuietly(org, 'cus_1', 30);
      await rewriteIndexQuietly(org, 'cus_2', 50);
      const [trusted, olderStamp, unverified] = await Promise.all([
        gateVerified(org, 'cus_1', { verifiedVersion: 3, verifiedStamp: stamp }),
        gateVerified(org, 'cus_2', { verifiedVersion: 5, verifiedStamp: stamp - 1 }),
        gateVerified(org, 'cus_2'),
      ]);
      expect(trusted.versions).toMatchObject({ subscriber: 3, subscriberStamp: stamp });
      expect(olderStamp.versions).toMatchObject({ subscriber: 50, subscriberStamp: stamp });
      expect(unverified.versions).toMatchObject({ subscriber: 50, subscriberStamp: stamp });
    });

    it('reads every version once the stamp has moved: no eval is answered from a version older than the latest write', async () => {
      const { org, stamp } = await twoSubscribersAtStamp();
      await putSubscriber(org, 'cus_2', 6);
      const [one, two] = await Promise.all([
        gateVerified(org, 'cus_1', { verifiedVersion: 3, verifiedStamp: stamp }),
        gateVerified(org, 'cus_2', { verifiedVersion: 5, verifiedStamp: stamp }),
      ]);
      expect(one.versions).toMatchObject({ subscriber: 3, subscriberStamp: stamp + 1 });
      expect(two.versions).toMatchObject({ subscriber: 6, subscriberStamp: stamp + 1 });
    });

    it('reads every version when the stamp or the whole index is lost', async () => {
      const org = await newOrg(individual({}));
      await putSubscriber(org, 'cus_1', 3);
      const stamp = (await gate(org, clock.now(), 'cus_1')).versions.subscriberStamp;
      await redis.hdel(keys.subscriberVersions(org), '#w');
      await rewriteIndexQuietly(org, 'cus_1', 4);
      expect(
        (await gateVerified(org, 'cus_1', { verifiedVersion: 3, verifiedStamp: stamp })).versions,
      ).toMatchObject({
        subscriber: 4,
        subscriberStamp: 0,
      });
      await putSubscriber(org, 'cus_1', 5);
      const restarted = (await gate(org, clock.now(), 'cus_1')).versions.subscriberStamp;
      await redis.del(keys.subscriberVersions(org));
      expect(
        (await gateVerified(org, 'cus_1', { verifiedVersion: 5, verifiedStamp: restarted })).versions,
      ).toMatchObject({
        subscriber: 0,
        subscriberStamp: 0,
      });
    });
  });

  it('gives each eval of one batch its own subscriber version and state, in arrival order', async () => {
    const org = await newOrg(individual({ evalLimit: 3, blocking: true }));
    await putSubscriber(org, 'cus_a', 11);
    await putSubscriber(org, 'cus_b', 22);
    const now = clock.now();
    // Issued in one event-loop turn: one script call applies them one after another.
    const results = await Promise.all(
      ['cus_a', 'cus_b', 'cus_a', 'cus_c'].map((subscriberId, i) =>
        meter.gate({ organizationId: org, subscriberId, nowMs: now + i }),
      ),
    );
    expect(results.map((r) => r.versions.subscriber)).toEqual([11, 22, 11, 0]);
    expect(results.map((r) => (r.outcome === 'counted' ? r.usage?.used : null))).toEqual([1, 2, 3, 4]);
    expect(results.map((r) => (r.outcome === 'counted' ? r.usage?.warn : null))).toEqual([
      null,
      null,
      '100',
      'grace',
    ]);
    const usage = await currentUsage(redis, keys, org, individual({ evalLimit: 3 }), now + 10);
    // first_over_at is the instant of the eval that reached the limit, not of the batch.
    expect(usage.first_over_at).toBe(toTimestamp(now + 2));
  });

  it('splits a month boundary inside one event-loop turn into the right months', async () => {
    const org = await newOrg(individual({}));
    const lastMs = at('2026-03-31T23:59:59.999Z');
    await Promise.all([
      meter.gate({ organizationId: org, subscriberId: 'cus_1', nowMs: lastMs }),
      meter.gate({ organizationId: org, subscriberId: 'cus_1', nowMs: lastMs + 1 }),
      meter.gate({ organizationId: org, subscriberId: 'cus_1', nowMs: lastMs + 2 }),
    ]);
    expect(await redis.hget(keys.evalUsage(org, '2026-03'), 'count')).toBe('1');
    expect(await redis.hget(keys.evalUsage(org, '2026-04'), 'count')).toBe('2');
  });

  it("puts back the month's count a Redis lost (restarted empty), from the count each gateway last saw", async () => {
    const org = await newOrg(individual({ evalLimit: 1000 }));
    await gateTimes(org, 5);
    await otherMeter.gate({ organizationId: org, subscriberId: 'cus_2', nowMs: clock.now() });
    expect(await usageOf(org)).toMatchObject({ count: 6 });
    // The other gateway counts 2 more, then Redis loses everything of the month.
    await otherMeter.gate({ organizationId: org, subscriberId: 'cus_2', nowMs: clock.now() });
    await otherMeter.gate({ organizationId: org, subscriberId: 'cus_2', nowMs: clock.now() });
    await redis.del(keys.evalUsage(org, '2026-03'));
    clock.advance(SECOND);

    // The first gateway last saw 5 (its own evals): put back, then its eval counted.
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { used: 6 } });
    // The other last saw 8: only the 3 beyond what was put back are added, then its eval.
    expect(await otherMeter.gate({ organizationId: org, subscriberId: 'cus_2', nowMs: clock.now() })).toMatchObject({
      usage: { used: 10 },
    });
    // Neither puts it back twice.
    expect(await gate(org)).toMatchObject({ usage: { used: 11 } });
    expect(await otherMeter.gate({ organizationId: org, subscriberId: 'cus_2', nowMs: clock.now() })).toMatchObject({
      usage: { used: 12 },
    });
    expect(await usageOf(org)).toMatchObject({ count: 12 });
  });

  it('never counts a figure twice over two losses: the largest figure shown is put back, once', async () => {
    const org = await newOrg(individual({ evalLimit: 1000 }));
    const other = () => otherMeter.gate({ organizationId: org, subscriberId: 'cus_2', nowMs: clock.now() });
    await gateTimes(org, 3);
    await other(); // the other gateway last saw 4
    await gateTimes(org, 2); // this one 6
    await redis.del(keys.evalUsage(org, '2026-03'));
    clock.advance(SECOND);
    expect(await gate(org)).toMatchObject({ usage: { used: 7 } });
    await gateTimes(org, 2); // 9, and the other gateway still holds 4 from before the first loss
    await redis.del(keys.evalUsage(org, '2026-03'));
    clock.advance(SECOND);
    expect(await gate(org)).toMatchObject({ usage: { used: 10 } });
    expect(await other()).toMatchObject({ usage: { used: 11 } });
    expect(await usageOf(org)).toMatchObject({ count: 11 });
  });

  it('puts back the count as it stood after refunds, not the highest it ever showed', async () => {
    const org = await newOrg(individual({ evalLimit: 1000 }));
    await gateTimes(org, 4);
    await meter.refund(org, clock.now());
    await meter.refund(org, clock.now());
    expect(await gate(org)).toMatchObject({ usage: { used: 3 } });
    await redis.del(keys.evalUsage(org, '2026-03'));
    clock.advance(SECOND);
    expect(await gate(org)).toMatchObject({ usage: { used: 4 } });
  });

  it("puts back a gateway's figure less the refunds it sent after its last reply", async () => {
    const org = await newOrg(individual({ evalLimit: 1000 }));
    await gateTimes(org, 4);
    await meter.refund(org, clock.now());
    await meter.refund(org, clock.now());
    await redis.del(keys.evalUsage(org, '2026-03'));
    clock.advance(SECOND);
    expect(await gate(org)).toMatchObject({ usage: { used: 3 } });
  });

  it('gives an older copy of the hash coming back (a restored backup) no newer figure on top', async () => {
    const org = await newOrg(individual({ evalLimit: 1000 }));
    const usageKey = keys.evalUsage(org, '2026-03');
    await gateTimes(org, 3);
    const older = await redis.hgetall(usageKey);
    await redis.del(usageKey);
    clock.advance(SECOND);
    expect(await gate(org)).toMatchObject({ usage: { used: 4 } });
    await redis.del(usageKey);
    await redis.hset(usageKey, older);
    expect(await gate(org)).toMatchObject({ usage: { used: 4 } });
  });

  it('puts back nothing while the hash lives: a count below what a gateway saw (refunds) stays as it is', async () => {
    const org = await newOrg(individual({ evalLimit: 1000 }));
    await gateTimes(org, 4);
    await meter.refund(org, clock.now());
    await meter.refund(org, clock.now());
    expect(await gate(org)).toMatchObject({ usage: { used: 3 } });
    expect(await usageOf(org)).toMatchObject({ count: 3 });
  });

  it("starts a new month from zero: a gateway's figure for the last month is not carried over", async () => {
    const org = await newOrg(individual({ evalLimit: 1000 }));
    await gateTimes(org, 3);
    clock.set(at('2026-04-01T00:00:01.000Z'));
    expect(await gate(org)).toMatchObject({ usage: { used: 1 } });
  });

  it("lets a month's usage expire on its own", async () => {
    const org = await newOrg(individual({}));
    await gate(org);
    const ttl = await redis.pttl(keys.evalUsage(org, '2026-03'));
    const expected = usageTtlMs(clock.now());
    expect(ttl).toBeGreaterThan(0);
    expect(Math.abs(ttl - expected)).toBeLessThan(60_000);
  });
});
