import type { Kysely, Transaction } from 'kysely';
import type { Database, Feature, FeatureKind } from '@ent/common/db/database';

type Db = Kysely<Database> | Transaction<Database>;

export function findFeature(db: Db, organizationId: string, key: string): Promise<Feature | undefined> {
  return db
    .selectFrom('features')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('key', '=', key)
    .executeTakeFirst();
}

export function findFeaturesByKeys(db: Db, organizationId: string, keys: string[]): Promise<Feature[]> {
  if (keys.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('features')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('key', 'in', keys)
    .execute();
}

export interface FeatureListFilter {
  limit: number;
  startingAfter?: string;
  kind?: FeatureKind;
}

/** Ordered by key; fetches one extra row to tell whether another page follows. */
export function listFeatures(db: Db, organizationId: string, filter: FeatureListFilter): Promise<Feature[]> {
  let query = db.selectFrom('features').selectAll().where('organization_id', '=', organizationId);
  if (filter.kind) query = query.where('kind', '=', filter.kind);
  if (filter.startingAfter) query = query.where('key', '>', filter.startingAfter);
  return query.orderBy('key').limit(filter.limit + 1).execute();
}
