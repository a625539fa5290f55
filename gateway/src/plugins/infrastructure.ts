import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Clock } from '@ent/common/clock';
import type { Config } from '@ent/common/config';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { redisKeys, type RedisKeys } from '@ent/common/redis/keys';
import { snapshotStore, type SnapshotStore } from '@ent/common/snapshots/store';

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
    clock: Clock;
    redis: RedisClient;
    redisKeys: RedisKeys;
    snapshotStore: SnapshotStore;
  }
}

export interface GatewayInfrastructureOptions {
  config: Config;
  clock: Clock;
  redis?: RedisClient;
}

/**
 * The gateway's Redis connection fails fast instead of queueing while Redis is down (no offline queue, short
 * command timeout), so evals of cached subscribers keep answering and the others get a prompt 503.
 * Auto-pipelining is off: the gate batcher already gathers an organization's evals into one command per round trip,
 * and ioredis's own per-turn pipeline on top of it only costs CPU (measured: about 15% of the gateway's
 * CPU per eval).
 */
export function createGatewayRedis(config: Config): RedisClient {
  return createRedis(config, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    enableAutoPipelining: false,
  });
}

/** Waits (bounded) for the first connection; a gateway starting while Redis is down starts degraded. */
async function waitForRedis(redis: RedisClient, timeoutMs = 3000): Promise<boolean> {
  if (redis.status === 'ready') return true;
  return new Promise((resolve) => {
    const timer = setTimeout(() => done(false), timeoutMs);
    const done = (ok: boolean) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    redis.on('ready', onReady);
  });
}

export const infrastructure = fp<GatewayInfrastructureOptions>(
  async function infrastructure(app: FastifyInstance, options) {
    const redis = options.redis ?? createGatewayRedis(options.config);
    redis.on('error', () => {}); // reported per command; reconnects on its own
    await waitForRedis(redis);
    const keys = redisKeys(options.config.redisKeyPrefix);
    app.decorate('config', options.config);
    app.decorate('clock', options.clock);
    app.decorate('redis', { getter: () => redis });
    app.decorate('redisKeys', keys);
    app.decorate('snapshotStore', snapshotStore(redis, keys));
    app.addHook('onClose', async () => {
      if (!options.redis) redis.disconnect();
    });
  },
  { name: 'infrastructure' },
);
