import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { notFound } from '@ent/common/errors/app-error';
import type { RedisClient } from '@ent/common/redis/connect';
import { meteredMember, type RedisKeys } from '@ent/common/redis/keys';
import { meteredPeriodOf, meteredResult, meteredTermsOf } from '@ent/common/resolve/resolve';
import { buildCatalog, buildSubscribers } from '@ent/common/snapshots/build';
import type { SubscriberUsage } from '@ent/contract/metered-usage';
import { persistedFigures } from './current-usage-store.ts';

export interface CurrentUsage {
  body: SubscriberUsage;
  /** Redis could not be read: every figure is Postgres's, which the worker writes about every second. */
  redisUnavailable: boolean;
}

/**
 * Every metered feature's current period for one subscriber, as `GET /org/subscribers/{id}/usage` answers it: the
 * terms resolved from Postgres's catalog and subscriber (the documents the snapshots are built from), the figure
 * from Redis (the hot copy), else from Postgres (a balance Redis does not hold: never used, or Redis came back
 * empty and no gateway has refilled it yet), else 0.
 */
export async function currentUsage(
  deps: { db: Kysely<Database>; redis: RedisClient; keys: RedisKeys },
  organizationId: string,
  subscriberId: string,
  nowMs: number,
): Promise<CurrentUsage> {
  const { db, redis, keys } = deps;
  const [catalog, subscribers] = await Promise.all([
    buildCatalog(db, organizationId),
    buildSubscribers(db, organizationId, [subscriberId]),
  ]);
  if (!catalog) throw notFound(`No organization "${organizationId}".`);
  const subscriber = subscribers.get(subscriberId);
  if (!subscriber) {
    throw notFound(`No subscriber "${subscriberId}".`, { field: 'subscriber_id', value: subscriberId });
  }
  const balances = Object.keys(catalog.doc.features)
    .filter((feature) => catalog.doc.features[feature] === 'metered')
    .sort()
    .map((feature) => {
      const terms = meteredTermsOf(catalog.doc, subscriber.doc, feature, nowMs);
      const period = meteredPeriodOf(terms, nowMs);
      return { feature, terms, period, periodStartMs: period.startMs };
    });

  let hot: (string | null)[] = [];
  let redisUnavailable = false;
  try {
    hot = await Promise.all(
      balances.map((balance) =>
        redis.hget(
          keys.meteredBalance(
            organizationId,
            meteredMember(subscriberId, balance.feature, balance.periodStartMs),
          ),
          'u',
        ),
      ),
    );
  } catch {
    redisUnavailable = true;
  }
  const figureOf = (i: number): string | null => hot[i] ?? null;
  const persisted = await persistedFigures(
    db,
    organizationId,
    subscriberId,
    balances.filter((_, i) => figureOf(i) === null),
  );
  const usage = balances.map((balance, i) => {
    const figure = figureOf(i);
    const used =
      figure === null ? (persisted.get(`${balance.feature}|${balance.periodStartMs}`) ?? 0) : Number(figure);
    return meteredResult(balance.feature, balance.terms, balance.period, used);
  });
  return { body: { subscriber_id: subscriberId, usage }, redisUnavailable };
}
