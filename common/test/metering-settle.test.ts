import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@ent/common/config';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { redisKeys, type RedisKeys } from '@ent/common/redis/keys';
import { publishArrangement, SELF_SERVE_ARRANGEMENT } from '@ent/common/metering/arrangement';
import { EvalGateUnavailableError } from '../../gateway/src/metering/contract.ts';
import { createEvalMeter, gateArguments } from '../../gateway/src/metering/meter.ts';
import { GRACE_PERIOD_MS, periodOf, usageTtlMs } from '@ent/common/metering/period';
import { GATE_REPLY_HEADER, withMeteringCommands, type MeteringRedis } from '../../gateway/src/metering/scripts.ts';
import { GATE_BATCH_MEMORY_MS } from '../../gateway/src/metering/settlements.ts';
import { deleteKeys } from '../../test-support/redis-keys.ts';
import { redisCluster, singleRedis } from '../../test-support/redis-setups.ts';

const NOW = Date.parse('2026-03-10T12:00:00.000Z');

describe.each([singleRedis, redisCluster])('gate batch ids and settlements on $name', (setup) => {
  let stopRedis: () => Promise<void>;
  let redis: MeteringRedis;
  let keys: RedisKeys;
  const prefix = `t${randomBytes(5).toString('hex')}`;

  beforeAll(async () => {
    const started = await setup.start();
    stopRedis = started.stop;
    redis = withMeteringCommands(createRedis(started.config));
    keys = redisKeys(prefix);
  });

  afterAll(async () => {
    if (redis && !('nodes' in redis)) {
      await deleteKeys(redis, `${prefix}:*`);
    }
    redis?.disconnect();
    await stopRedis?.();
  });

  const newOrg = async (burstPerSecond = 10_000) => {
    const organizationId = `org_${randomBytes(6).toString('hex')}`;
    await publishArrangement(redis, keys, organizationId, { ...SELF_SERVE_ARRANGEMENT, evalLimit: 1000, burstPerSecond });
    return organizationId;
  };
  /** The raw gate script, as the meter calls it, for `evals` evals at NOW. */
  const gateBatch = (org: string, batchId: string, evals: number) =>
    redis.evalGateBatch(
      keys.arrangement(org),
      keys.evalUsage(org, periodOf(NOW)),
      keys.burst(org),
      keys.catalog(org),
      keys.auth(org),
      keys.gateBatch(org, batchId),
      keys.subscriberVersions(org),
      usageTtlMs(NOW),
      GRACE_PERIOD_MS,
      GATE_BATCH_MEMORY_MS,
      '',
      0,
      ...gateArguments(
        Array.from({ length: evals }, (_, i) => ({ organizationId: org, subscriberId: `cus_${i}`, nowMs: NOW })),
        0,
      ).args,
      // No deadline: the batch carries no metered operation.
      '',
    );
  const settle = (org: string, batchId: string, answered: number) =>
    redis.evalSettle(
      keys.arrangement(org),
      keys.evalUsage(org, periodOf(NOW)),
      keys.gateBatch(org, batchId),
      keys.meteredDirty(org),
      answered,
      NOW,
      usageTtlMs(NOW),
      GATE_BATCH_MEMORY_MS,
      keys.meteredBalance(org, ''),
      keys.usageIdempotency(org, ''),
    );
  const countOf = async (org: string) => Number((await redis.hget(keys.evalUsage(org, periodOf(NOW)), 'count')) ?? 0);

  it('counts a batch once when the same batch id runs twice, and remembers it only briefly', async () => {
    const org = await newOrg();
    expect((await gateBatch(org, 'b1', 3)).slice(0, 1)).toEqual([0]);
    expect(await gateBatch(org, 'b1', 3)).toEqual([4]);
    expect(await countOf(org)).toBe(3);
    expect(await redis.get(keys.gateBatch(org, 'b1'))).toBe('3');
    const ttl = await redis.pttl(keys.gateBatch(org, 'b1'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(GATE_BATCH_MEMORY_MS);
  });

  it('settles a batch that ran by the exact difference: 2xx answers minus what the script counted', async () => {
    const org = await newOrg(2);
    // Burst 2: of 4 evals the script counted 2 (and rate-limited 2); the gateway answered 3 of them 2xx.
    const reply = await gateBatch(org, 'b2', 4);
    expect(reply.slice(GATE_REPLY_HEADER).map((encoded) => encoded % 4)).toEqual([0, 0, 1, 1]);
    expect(await countOf(org)).toBe(2);
    expect((await settle(org, 'b2', 3)).slice(0, 3)).toEqual([0, 3, 1]);
    expect(await countOf(org)).toBe(3);
  });

  it('refunds in full a batch none of whose counted evals was answered 2xx', async () => {
    const org = await newOrg();
    await gateBatch(org, 'b3', 2);
    expect((await settle(org, 'b3', 0)).slice(0, 3)).toEqual([0, 0, -2]);
    expect(await countOf(org)).toBe(0);
  });

  it('applies a settlement once however often it is retried, and a late run of its batch changes nothing', async () => {
    const org = await newOrg();
    await gateBatch(org, 'b4', 2);
    expect((await settle(org, 'b4', 5)).slice(0, 3)).toEqual([0, 5, 3]);
    expect(await settle(org, 'b4', 5)).toEqual([5, 0, 0]);
    expect(await settle(org, 'b4', 1)).toEqual([5, 0, 0]);
    expect(await gateBatch(org, 'b4', 2)).toEqual([4]);
    expect(await countOf(org)).toBe(5);
  });

  it('counts the 2xx answers of a batch that never ran, and then refuses to run it', async () => {
    const org = await newOrg();
    expect((await settle(org, 'b5', 4)).slice(0, 3)).toEqual([0, 4, 4]);
    expect(await gateBatch(org, 'b5', 4)).toEqual([4]);
    expect(await countOf(org)).toBe(4);
  });

  it('treats a refund as a settlement of -1 with its own id: applied once', async () => {
    const org = await newOrg();
    await gateBatch(org, 'b6', 2);
    expect((await settle(org, 'refund-1', -1)).slice(0, 3)).toEqual([0, 1, -1]);
    expect(await settle(org, 'refund-1', -1)).toEqual([5, 0, 0]);
    expect(await countOf(org)).toBe(1);
  });

  it('needs the arrangement: without it nothing changes and nothing is marked', async () => {
    const org = `org_${randomBytes(6).toString('hex')}`;
    expect(await settle(org, 'b7', 2)).toEqual([3, 0, 0]);
    expect(await redis.exists(keys.gateBatch(org, 'b7'))).toBe(0);
  });
});

describe('eval meter with Redis unreachable', () => {
  let live: RedisClient;
  let down: RedisClient;
  const prefix = `t${randomBytes(5).toString('hex')}`;
  const keys = redisKeys(prefix);

  beforeAll(() => {
    const config = { redisUrl: loadConfig().redisUrl, redisClusterNodes: [] };
    live = createRedis(config);
    // Not connected yet: its calls are known never to have reached Redis.
    down = createRedis(config, { lazyConnect: true });
  });

  afterAll(async () => {
    await deleteKeys(live, `${prefix}:*`);
    live.disconnect();
    down.disconnect();
  });

  it('fails a gate call it cannot send, then settles the 2xx answers its evals report, once, when Redis is back', async () => {
    const organizationId = `org_${randomBytes(6).toString('hex')}`;
    const meter = createEvalMeter({ redis: down, keys, loadArrangement: async () => SELF_SERVE_ARRANGEMENT });
    const failures = await Promise.all(
      [1, 2, 3].map((i) => meter.gate({ organizationId, subscriberId: `cus_${i}`, nowMs: NOW }).catch((error: unknown) => error)),
    );
    expect(failures.every((error) => error instanceof EvalGateUnavailableError)).toBe(true);
    // Two answered from memory (2xx), one 503; a refund Redis could not take is owed too.
    (failures as EvalGateUnavailableError[]).forEach((error, i) => error.report(i < 2));
    (failures[0] as EvalGateUnavailableError).report(true); // a second report of one eval is ignored
    await meter.refund(organizationId, NOW);
    expect(meter.pendingSettlements()).toBe(2);

    await meter.settlePending(); // still unreachable: kept
    expect(meter.pendingSettlements()).toBe(2);
    await down.connect();
    await meter.settlePending();
    expect(meter.pendingSettlements()).toBe(0);
    expect(await live.hget(keys.evalUsage(organizationId, periodOf(NOW)), 'count')).toBe('1');
    await meter.settlePending();
    expect(await live.hget(keys.evalUsage(organizationId, periodOf(NOW)), 'count')).toBe('1');
  });
});
