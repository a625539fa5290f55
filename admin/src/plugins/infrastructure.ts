import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import type { Clock } from '@ent/common/clock';
import type { Config } from '@ent/common/config';
import type { Database } from '@ent/common/db/database';
import { createDb } from '@ent/common/db/connect';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { redisKeys, type RedisKeys } from '@ent/common/redis/keys';

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
    clock: Clock;
    db: Kysely<Database>;
    redis: RedisClient;
    redisKeys: RedisKeys;
  }
}

export interface InfrastructureOptions {
  config: Config;
  clock: Clock;
  /** Injected by tests that share one connection; otherwise created here and closed on shutdown. */
  db?: Kysely<Database>;
  redis?: RedisClient;
}

/** Postgres, Redis, configuration and the clock: the resources every admin feature uses. */
export const infrastructure = fp<InfrastructureOptions>(
  async function infrastructure(app: FastifyInstance, options) {
    const db = options.db ?? createDb(options.config.databaseUrl);
    const redis = options.redis ?? createRedis(options.config);
    app.decorate('config', options.config);
    app.decorate('clock', options.clock);
    app.decorate('db', db);
    app.decorate('redis', { getter: () => redis });
    app.decorate('redisKeys', redisKeys(options.config.redisKeyPrefix));
    app.addHook('onClose', async () => {
      if (!options.db) await db.destroy();
      if (!options.redis) redis.disconnect();
    });
  },
  { name: 'infrastructure' },
);
