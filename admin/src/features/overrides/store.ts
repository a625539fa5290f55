import type { Kysely, Transaction } from 'kysely';
import type { Database, FeatureKind, Override } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';

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

/** One of the subscriber's overrides by its own id (`ovr_…`). */
export function findOverrideById(
  db: Db,
  organizationId: string,
  subscriberId: string,
  overrideId: string,
): Promise<OverrideWithFeature | undefined> {
  return withFeatureKey(db, organizationId, subscriberId).where('o.id', '=', overrideId).executeTakeFirst();
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

/** An override's value columns: `allowed` for a flag, `limit_value` for a limit, and the expiry. */
export interface OverrideColumns {
  allowed: boolean | null;
  limit_value: number | null;
  expires_at: Date | null;
}

export function insertOverride(
  trx: Transaction<Database>,
  organizationId: string,
  subscriberId: string,
  feature: { id: string; kind: FeatureKind },
  columns: OverrideColumns,
): Promise<Override> {
  return trx
    .insertInto('overrides')
    .values({
      id: newId('ovr'),
      organization_id: organizationId,
      subscriber_id: subscriberId,
      feature_id: feature.id,
      feature_kind: feature.kind,
      ...columns,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function updateOverrideRow(
  trx: Transaction<Database>,
  overrideId: string,
  columns: OverrideColumns,
): Promise<Override> {
  return trx
    .updateTable('overrides')
    .set({ ...columns, updated_at: new Date() })
    .where('id', '=', overrideId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The deleted override, or undefined when there was none. */
export function deleteOverrideRow(
  trx: Transaction<Database>,
  organizationId: string,
  subscriberId: string,
  featureId: string,
): Promise<Override | undefined> {
  return trx
    .deleteFrom('overrides')
    .where('organization_id', '=', organizationId)
    .where('subscriber_id', '=', subscriberId)
    .where('feature_id', '=', featureId)
    .returningAll()
    .executeTakeFirst();
}
