import { randomBytes } from 'node:crypto';
import { Cluster } from 'ioredis';
import type { RedisClient } from '@ent/common/redis/connect';

/**
 * Deletes every key matching `pattern`, on a single Redis or on every master of a cluster (one key per UNLINK: no
 * cross-slot), a page of SCAN at a time: the Redis is shared, and KEYS would walk every key on it in one command
 * (seconds with a big keyspace: past the client's command timeout, and blocking everyone else meanwhile).
 */
export async function deleteKeys(redis: RedisClient, pattern: string): Promise<number> {
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  let deleted = 0;
  for (const node of nodes) {
    for await (const keys of node.scanStream({ match: pattern, count: 1000 }) as AsyncIterable<string[]>) {
      const unlinked = await Promise.all(keys.map((key) => redis.unlink(key)));
      deleted += unlinked.reduce((sum, count) => sum + count, 0);
    }
  }
  return deleted;
}

/** A unique Redis key prefix per test file, so files never see each other's keys. */
export const testRedisPrefix = () => `t${randomBytes(5).toString('hex')}`;
