import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';
import type { CreditWithFeature } from './store.ts';

/**
 * Each credit's spent figure now: Redis's (the hot copy the gateway spends from) where it holds one, else the
 * `spent` the worker last persisted. One HMGET per subscriber and feature. Redis unreachable: Postgres's figures.
 */
export async function currentSpent(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  credits: readonly CreditWithFeature[],
): Promise<Map<string, number>> {
  const spent = new Map(credits.map((credit) => [credit.id, credit.spent]));
  const groups = new Map<string, { subscriberId: string; feature: string; ids: string[] }>();
  for (const credit of credits) {
    const group = `${credit.subscriber_id}|${credit.feature_key}`;
    const entry = groups.get(group) ?? {
      subscriberId: credit.subscriber_id,
      feature: credit.feature_key,
      ids: [],
    };
    entry.ids.push(credit.id);
    groups.set(group, entry);
  }
  if (groups.size === 0) return spent;
  try {
    const replies = await Promise.all(
      [...groups.values()].map(async (group) => ({
        ids: group.ids,
        figures: await redis.hmget(
          keys.creditSpent(organizationId, group.subscriberId, group.feature),
          ...group.ids,
        ),
      })),
    );
    for (const { ids, figures } of replies) {
      ids.forEach((id, i) => {
        const figure = figures[i];
        if (figure !== null && figure !== undefined) spent.set(id, Number(figure));
      });
    }
  } catch {
    // Postgres's figures are at most about a second behind (the worker's persist interval).
  }
  return spent;
}
