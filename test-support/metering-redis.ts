import { afterAll } from 'vitest';
import { loadConfig } from '@ent/common/config';
import { publishArrangement, type Arrangement } from '@ent/common/metering/arrangement';
import { GRACE_PERIOD_MS, periodOf, usageTtlMs } from '@ent/common/metering/period';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { redisKeys, type RedisKeys } from '@ent/common/redis/keys';
import type { CatalogDoc, SubscriberDoc } from '@ent/common/snapshots/documents';
import { snapshotStore } from '@ent/common/snapshots/store';
import { createEvalMeter, gateArguments, type EvalMeterOptions } from '../gateway/src/metering/meter.ts';
import {
  createMeteredBalances,
  type MeteredBalancesOptions,
} from '../gateway/src/metering/metered-balances.ts';
import {
  giveBackArguments,
  usageApplyArguments,
  type MeteredOperation,
} from '../gateway/src/metering/metered-operations.ts';
import { withMeteringCommands, type MeteringRedis } from '../gateway/src/metering/scripts.ts';
import { GATE_BATCH_MEMORY_MS } from '../gateway/src/metering/settlements.ts';
import { deleteKeys, testRedisPrefix } from './redis-keys.ts';

/** The versions seeded documents carry: an operation resolved with them is current. */
export const SEEDED_VERSIONS = { catalogVersion: 3, subscriberVersion: 5 } as const;

/** Never limits the tests' evals: none of them is about the eval allowance or the burst. */
export const OPEN_ARRANGEMENT: Arrangement = {
  plan: null,
  evalLimit: null,
  blocking: false,
  burstPerSecond: 1000,
};

/**
 * This test file's own key prefix on the shared Redis and a client with the metering scripts; registers the afterAll
 * that deletes the prefix's keys and disconnects. Call it once, at the file's top level.
 */
export function meteringTestRedis(): { keys: RedisKeys; redis: MeteringRedis } {
  const prefix = testRedisPrefix();
  const redis = withMeteringCommands(createRedis(loadConfig()));
  afterAll(async () => {
    await deleteKeys(redis, `${prefix}:*`);
    redis.disconnect();
  });
  return { keys: redisKeys(prefix), redis };
}

export interface SeededOrganizationOptions {
  /** Another client than the file's (its own Redis). */
  redis?: RedisClient;
  /** Instead of the file's subscribers. */
  subscribers?: Record<string, SubscriberDoc>;
  /** Without the readiness marker: as after Redis came back empty. */
  ready?: boolean;
  burstPerSecond?: number;
}

/**
 * A fresh organization per call, seeded as a gateway finds one: the catalog and each subscriber at SEEDED_VERSIONS,
 * the arrangement (OPEN_ARRANGEMENT unless given) and, unless `ready: false`, the metered readiness marker.
 */
export function seededOrganizations(seed: {
  redis: RedisClient;
  keys: RedisKeys;
  catalog: CatalogDoc;
  subscribers: Record<string, SubscriberDoc>;
  arrangement?: Arrangement;
}): (options?: SeededOrganizationOptions) => Promise<string> {
  let count = 0;
  return async (options = {}) => {
    const org = `org_${count++}`;
    const redis = options.redis ?? seed.redis;
    const store = snapshotStore(redis, seed.keys);
    await store.putCatalog(org, { version: SEEDED_VERSIONS.catalogVersion, doc: seed.catalog });
    for (const [subscriberId, doc] of Object.entries(options.subscribers ?? seed.subscribers))
      await store.putSubscriber(org, subscriberId, { version: SEEDED_VERSIONS.subscriberVersion, doc });
    const arrangement = seed.arrangement ?? OPEN_ARRANGEMENT;
    await publishArrangement(redis, seed.keys, org, {
      ...arrangement,
      burstPerSecond: options.burstPerSecond ?? arrangement.burstPerSecond,
    });
    if (options.ready !== false) await redis.set(seed.keys.meteredReady(org), '1');
    return org;
  };
}

/** A gate meter as the gateway builds one, its arrangement loaded as OPEN_ARRANGEMENT unless given. */
export const openEvalMeter = (
  options: Pick<EvalMeterOptions, 'redis' | 'keys'> & Partial<EvalMeterOptions>,
) => createEvalMeter({ loadArrangement: async () => OPEN_ARRANGEMENT, ...options });

/**
 * Metered balances as the gateway builds them, with nothing persisted in Postgres unless given, their failed calls
 * settled through an open gate meter's settlements (as the gateway wires them) unless given.
 */
export const unpersistedBalances = (
  options: Pick<MeteredBalancesOptions, 'redis' | 'keys' | 'clock'> & Partial<MeteredBalancesOptions>,
) =>
  createMeteredBalances({
    loadBalances: async () => ({ balances: [], credits: [] }),
    settlements: openEvalMeter({ redis: options.redis, keys: options.keys }),
    ...options,
  });

/**
 * eval-gate-batch-8.lua called as the meter calls it: one eval of `subscriberId` at `nowMs` per entry of `evals`,
 * each carrying its metered operations (none: undefined); `deadline` '' for a call without one.
 */
export function gateBatchCall(
  redis: MeteringRedis,
  keys: RedisKeys,
  call: {
    org: string;
    batchId: string;
    subscriberId: string;
    nowMs: number;
    evals: (MeteredOperation[] | undefined)[];
    deadline: number | '';
  },
) {
  const { org, batchId, nowMs } = call;
  return redis.evalGateBatch(
    keys.arrangement(org),
    keys.evalUsage(org, periodOf(nowMs)),
    keys.burst(org),
    keys.catalog(org),
    keys.auth(org),
    keys.gateBatch(org, batchId),
    keys.subscriberVersions(org),
    usageTtlMs(nowMs),
    GRACE_PERIOD_MS,
    GATE_BATCH_MEMORY_MS,
    '',
    0,
    ...gateArguments(
      call.evals.map((metered) => ({ organizationId: org, subscriberId: call.subscriberId, nowMs, metered })),
      0,
      () => [
        keys.meteredBalance(org, ''),
        keys.usageIdempotency(org, ''),
        keys.meteredDirty(org),
        keys.meteredReady(org),
      ],
    ).args,
    call.deadline,
  );
}

/** usage-apply-6.lua called as metered balances call it, its memory under `callId`. */
export const usageApplyCall = (
  redis: MeteringRedis,
  keys: RedisKeys,
  call: { org: string; callId: string; ops: readonly MeteredOperation[]; deadline: number },
) =>
  redis.usageApply(
    keys.catalog(call.org),
    keys.subscriberVersions(call.org),
    keys.meteredDirty(call.org),
    keys.meteredReady(call.org),
    keys.gateBatch(call.org, call.callId),
    ...usageApplyArguments(keys.meteredBalance(call.org, ''), keys.usageIdempotency(call.org, ''), call.ops),
    GATE_BATCH_MEMORY_MS,
    call.deadline,
  );

/**
 * eval-settle-4.lua for a batch, as the meter calls it once `answered` of its evals were answered 2xx; for a usage
 * call, with its operations.
 */
export const settleCall = (
  redis: MeteringRedis,
  keys: RedisKeys,
  call: {
    org: string;
    batchId: string;
    nowMs: number;
    answered: number;
    operations?: readonly MeteredOperation[] | undefined;
  },
) =>
  redis.evalSettle(
    keys.arrangement(call.org),
    keys.evalUsage(call.org, periodOf(call.nowMs)),
    keys.gateBatch(call.org, call.batchId),
    keys.meteredDirty(call.org),
    call.answered,
    call.nowMs,
    usageTtlMs(call.nowMs),
    GATE_BATCH_MEMORY_MS,
    keys.meteredBalance(call.org, ''),
    keys.usageIdempotency(call.org, ''),
    ...giveBackArguments(call.operations ?? []),
  );
