import type { Kysely, Transaction } from 'kysely';
import { newId } from '@ent/common/ids';
import type { Database, Feature, FeatureKind } from '@ent/common/db/database';
import type { CreateFeatureBody, UpdateFeatureBody } from '@ent/contract/features';

type Db = Kysely<Database> | Transaction<Database>;

export function findFeature(db: Db, organizationId: string, key: string): Promise<Feature | undefined> {
  return db
    .selectFrom('features')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('key', '=', key)
    .executeTakeFirst();
}

/** The feature's row, locked until the transaction ends; undefined when there is none. */
export function lockFeature(
  trx: Transaction<Database>,
  organizationId: string,
  key: string,
): Promise<Feature | undefined> {
  return trx
    .selectFrom('features')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('key', '=', key)
    .forUpdate()
    .executeTakeFirst();
}

/** The new feature, or undefined when its key is taken. */
export function insertFeature(
  trx: Transaction<Database>,
  organizationId: string,
  input: CreateFeatureBody,
): Promise<Feature | undefined> {
  return trx
    .insertInto('features')
    .values({
      id: newId('feat'),
      organization_id: organizationId,
      key: input.key,
      name: input.name,
      kind: input.kind,
      description: input.description ?? '',
    })
    .onConflict((oc) => oc.columns(['organization_id', 'key']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export function updateFeatureRow(
  trx: Transaction<Database>,
  id: string,
  input: UpdateFeatureBody,
): Promise<Feature> {
  return trx
    .updateTable('features')
    .set({ ...input, updated_at: new Date() })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
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
  return query
    .orderBy('key')
    .limit(filter.limit + 1)
    .execute();
}
