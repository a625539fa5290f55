import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import { publishArrangement } from '@ent/common/metering/arrangement';
import { snapshotStore } from '@ent/common/snapshots/store';
import { ManualClock } from '@ent/common/clock';
import { createEvalMeter } from '../../src/metering/meter.ts';
import { meteredOperation } from '../../src/metering/metered-operations.ts';
import {
  promotionAndTopUp,
  proMeteredCatalog,
  proSubscriber,
} from '../../../test-support/metered-documents.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { redisCluster } from '../../../test-support/redis-setups.ts';
import { unpersistedBalances } from '../../../test-support/metering-redis.ts';

/**
 * The metered scripts build balance and idempotency keys from the organization's prefix (not declared as KEYS): on a
 * Redis Cluster they stay in the organization's slot, so the gate call and the usage script run there as on one Redis.
 */
const catalog = proMeteredCatalog({ calls: { limit: 5 } });
const alice = proSubscriber;
const clock = new ManualClock(Date.parse('2026-03-10T12:00:00Z'));
const keys = redisKeys(testRedisPrefix());
let stop: () => Promise<void>;
let redis: RedisClient;

beforeAll(async () => {
  const started = await redisCluster.start();
  stop = started.stop;
  redis = createRedis(started.config);
}, 120_000);
afterAll(async () => {
  redis?.disconnect();
  await stop?.();
});

describe('metered scripts on a Redis Cluster', () => {
  it('consume in the gate call, a report with an idempotency key, and a refill', async () => {
    const org = 'org_cluster';
    await snapshotStore(redis, keys).putCatalog(org, { version: 3, doc: catalog });
    await snapshotStore(redis, keys).putSubscriber(org, 'alice', { version: 5, doc: alice });
    await publishArrangement(redis, keys, org, {
      plan: null,
      evalLimit: null,
      blocking: false,
      burstPerSecond: 100,
    });
    const op = (kind: 'c' | 'd', amount: number, idem = '') =>
      meteredOperation(
        { catalog, subscriber: alice, catalogVersion: 3, subscriberVersion: 5 },
        'alice',
        'calls',
        kind,
        amount,
        clock.now(),
        idem,
        keys,
        org,
      );
    const balances = unpersistedBalances({ redis, keys, clock });
    expect(await balances.apply(org, [op('d', 2, 'k')])).toEqual([{ status: 'applied', used: 2 }]);
    expect((await balances.apply(org, [op('d', 2, 'k')]))[0]!.status).toBe('replayed');
    const meter = createEvalMeter({
      redis,
      keys,
      loadArrangement: async () => ({ plan: null, evalLimit: null, blocking: false, burstPerSecond: 100 }),
    });
    const gate = await meter.gate({
      organizationId: org,
      subscriberId: 'alice',
      nowMs: clock.now(),
      metered: [op('c', 3)],
    });
    expect(gate).toMatchObject({ outcome: 'counted', metered: [{ status: 'applied', used: 5 }] });
  }, 60_000);

  it('consumes past the allowance spend credits in the gate call (the credit-spent hash in the slot)', async () => {
    const org = 'org_cluster_credits';
    const { promo, topUp } = promotionAndTopUp(clock.now() - 2 * 3_600_000);
    const bob = { ...proSubscriber, credits: { calls: [topUp, promo] } };
    await snapshotStore(redis, keys).putCatalog(org, { version: 3, doc: catalog });
    await snapshotStore(redis, keys).putSubscriber(org, 'bob', { version: 5, doc: bob });
    const arrangement = { plan: null, evalLimit: null, blocking: false, burstPerSecond: 100 };
    await publishArrangement(redis, keys, org, arrangement);
    await redis.set(keys.meteredReady(org), '1');
    const meter = createEvalMeter({ redis, keys, loadArrangement: async () => arrangement });
    const consume = (amount: number) =>
      meter.gate({
        organizationId: org,
        subscriberId: 'bob',
        nowMs: clock.now(),
        metered: [
          meteredOperation(
            { catalog, subscriber: bob, catalogVersion: 3, subscriberVersion: 5 },
            'bob',
            'calls',
            'c',
            amount,
            clock.now(),
            '',
            keys,
            org,
          ),
        ],
      });
    // The allowance (5) and 2 of the promotion, then its last 3 and 1 of the top-up (k > 0: no EXISTS first).
    expect(await consume(7)).toMatchObject({
      outcome: 'counted',
      metered: [{ status: 'applied', used: 7, credits: { covered: 2, rollover: 0, spent: [2] } }],
    });
    expect(await consume(4)).toMatchObject({
      outcome: 'counted',
      metered: [{ status: 'applied', used: 11, credits: { covered: 6, rollover: 0, spent: [5, 1] } }],
    });
    expect(await redis.hgetall(keys.creditSpent(org, 'bob', 'calls'))).toEqual({
      cr_promo: '5',
      cr_topup: '1',
    });
  }, 60_000);
});
