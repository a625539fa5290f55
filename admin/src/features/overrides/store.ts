import type { Kysely, Transaction } from 'kysely';
import type { Database, Override } from '@ent/common/db/database';

type Db = Kysely<Database> | Transaction<Database>;

/** An override with the key of its feature: the API names features by key only. */
export type OverrideWithFeature = Override & { feature_key: string };

const withFeatureKey = (db: Db, organizationId: string, subscriberId: string) =>
  db
    .selectFrom('overrides as o')
    .innerJoin('features as f', 'f.id', 'o.feature_id')
    .selectAll('o')
    .select('f.key as feature_key')
    .where('o.organization_id', '=', organizationId)
    .where('o.subscriber_id', '=', subscriberId);

export function findOverride(
  db: Db,
  organizationId: string,
  subscriberId: string,
  featureId: string,
): Promise<OverrideWithFeature | undefined> {
  return withFeatureKey(db, organizationId, subscriberId)
    .where('o.feature_id', '=', featureId)
    .executeTakeFirst();
}

export interface OverrideListFilter {
  limit: number;
  startingAfter?: string;
  /** Leave out overrides whose expires_at is at or before this instant; undefined keeps them all. */
  liveAt?: Date;
}

/** Ordered by feature key; fetches one extra row to tell whether another page follows. */
export function listOverrides(
  db: Db,
  organizationId: string,
  subscriberId: string,
  filter: OverrideListFilter,
): Promise<OverrideWithFeature[]> {
  let query = withFeatureKey(db, organizationId, subscriberId);
  const { liveAt } = filter;
  if (liveAt)
    query = query.where((eb) => eb.or([eb('o.expires_at', 'is', null), eb('o.expires_at', '>', liveAt)]));
  if (filter.startingAfter) query = query.where('f.key', '>', filter.startingAfter);
  return query
    .orderBy('f.key')
    .limit(filter.limit + 1)
    .execute();
}
