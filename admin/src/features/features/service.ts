import { transact } from '@ent/common/outbox/record';
import type { Kysely } from 'kysely';
import { newId } from '@ent/common/ids';
import type { Database, Feature } from '@ent/common/db/database';
import { conflict, notFound } from '@ent/common/errors/app-error';
import type { CreateFeatureBody, UpdateFeatureBody } from '@ent/common/schemas/features';
import { changedFields, type Change } from '../shared/changes.ts';
import { assertCatalogRoom, type CatalogLimits } from '../shared/catalog-limits.ts';
import { bumpCatalogVersion } from '../shared/versions.ts';
import { findFeature } from './store.ts';

export const featureNotFound = (key: string) => notFound(`No feature with key "${key}".`, { field: 'key', value: key });

export async function createFeature(
  db: Kysely<Database>,
  organizationId: string,
  input: CreateFeatureBody,
  limits: CatalogLimits,
): Promise<Feature> {
  return transact(db, async (trx) => {
    await assertCatalogRoom(trx, organizationId, limits, { features: 1 });
    const created = await trx
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
    if (!created) throw conflict(`A feature with key "${input.key}" already exists.`, { field: 'key', value: input.key });
    await bumpCatalogVersion(trx, organizationId);
    return created;
  });
}

export interface FeatureUpdateResult {
  feature: Feature;
  changes: Record<string, Change> | null;
}

export async function updateFeature(
  db: Kysely<Database>,
  organizationId: string,
  key: string,
  input: UpdateFeatureBody,
): Promise<FeatureUpdateResult> {
  return transact(db, async (trx) => {
    const before = await trx
      .selectFrom('features')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .where('key', '=', key)
      .forUpdate()
      .executeTakeFirst();
    if (!before) throw featureNotFound(key);
    const changes = changedFields(before, input, ['name', 'description']);
    if (!changes) return { feature: before, changes };
    const feature = await trx
      .updateTable('features')
      .set({ ...input, updated_at: new Date() })
      .where('id', '=', before.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await bumpCatalogVersion(trx, organizationId);
    return { feature, changes };
  });
}

export async function getFeature(db: Kysely<Database>, organizationId: string, key: string): Promise<Feature> {
  const feature = await findFeature(db, organizationId, key);
  if (!feature) throw featureNotFound(key);
  return feature;
}
