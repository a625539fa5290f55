import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';
import type { CreditSpentSeed } from './bulk-credits.ts';

/**
 * Writes imported credits' spent figures into the credit-spent hashes the gateway spends from (one HSET per
 * subscriber and feature, pipelined). Postgres holds the same figure, so nothing is marked for the worker.
 */
export async function seedCreditSpent(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  seeds: readonly CreditSpentSeed[],
): Promise<void> {
  if (seeds.length === 0) return;
  const byHash = new Map<string, string[]>();
  for (const seed of seeds) {
    const key = keys.creditSpent(organizationId, seed.subscriberId, seed.feature);
    const fields = byHash.get(key) ?? [];
    fields.push(seed.creditId, String(seed.spent));
    byHash.set(key, fields);
  }
  const pipeline = redis.pipeline();
  for (const [key, fields] of byHash) pipeline.hset(key, ...fields);
  const replies = (await pipeline.exec()) ?? [];
  for (const [error] of replies) if (error) throw error;
}
