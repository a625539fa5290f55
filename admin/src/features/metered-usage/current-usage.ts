import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { notFound } from '@ent/common/errors/app-error';
import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';
import { meteredPeriodOf, meteredResult, meteredTermsOf } from '@ent/common/resolve/resolve';
import { buildCatalog, buildSubscribers } from '@ent/common/snapshots/build';
import type { SubscriberUsage } from '@ent/contract/metered-usage';
import { readBalanceFigures } from './balance-figures.ts';

export interface CurrentUsage {
  body: SubscriberUsage;
  /** Redis could not be read: every figure is Postgres's, which the worker writes about every second. */
  redisUnavailable: boolean;
}

/**
 * Every metered feature's current period for one subscriber, as `GET /org/subscribers/{id}/usage` answers it: the
 * terms resolved from Postgres's catalog and subscriber (the documents the snapshots are built from), the figures
 * from Redis (the hot copy), else from Postgres (a balance Redis does not hold: never used, or Redis came back
 * empty and no gateway has refilled it yet), else 0; the live credits listed as a check lists them.
 */
export async function currentUsage(
  deps: { db: Kysely<Database>; redis: RedisClient; keys: RedisKeys },
  organizationId: string,
  subscriberId: string,
  nowMs: number,
): Promise<CurrentUsage> {
  const { db } = deps;
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
      return { feature, terms, period };
    });

  const { figures, redisUnavailable } = await readBalanceFigures(
    deps,
    organizationId,
    subscriberId,
    subscriber.doc,
    balances,
    nowMs,
  );
  const usage = balances.map((balance, i) => {
    const { used, credits } = figures[i]!;
    return meteredResult(balance.feature, balance.terms, balance.period, used, undefined, credits);
  });
  return { body: { subscriber_id: subscriberId, usage }, redisUnavailable };
}
