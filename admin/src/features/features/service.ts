import { transact } from '@ent/common/outbox/record';
import type { Kysely } from 'kysely';
import type { Database, Feature } from '@ent/common/db/database';
import { conflict, notFound } from '@ent/common/errors/app-error';
import type { CreateFeatureBody, UpdateFeatureBody } from '@ent/common/schemas/features';
import { changedFields, type Change } from '../shared/changes.ts';
import { assertCatalogRoom, type CatalogLimits } from '../shared/catalog-limits.ts';
import { bumpCatalogVersion } from '../shared/versions.ts';
import {
  findFeature,
  insertFeature,
  listFeatures as listFeatureRows,
  lockFeature,
  updateFeatureRow,
  type FeatureListFilter,
} from './store.ts';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';
import { withOrganizationLocked } from '../organization/store.ts';

export const featureNotFound = (key: string) =>
  notFound(`No feature with key "${key}".`, { field: 'key', value: key });

export async function createFeature(
  db: Kysely<Database>,
  organizationId: string,
  input: CreateFeatureBody,
  limits: CatalogLimits,
): Promise<Feature> {
  return transact(db, async (trx) => {
    await assertCatalogRoom(trx, organizationId, limits, { features: 1 });
    const created = await insertFeature(trx, organizationId, input);
    if (!created)
      throw conflict(`A feature with key "${input.key}" already exists.`, { field: 'key', value: input.key });
    await bumpCatalogVersion(trx, organizationId);
    return created;
  });
}

/** A write's result: the row after it, and the audit details of what changed (null: nothing did). */
export interface FeatureUpdateResult {
  feature: Feature;
  details: Record<string, Change> | null;
}

export async function updateFeature(
  db: Kysely<Database>,
  organizationId: string,
  key: string,
  input: UpdateFeatureBody,
): Promise<FeatureUpdateResult> {
  return withOrganizationLocked(db, organizationId, async (trx) => {
    const before = await lockFeature(trx, organizationId, key);
    if (!before) throw featureNotFound(key);
    const details = changedFields(before, input, ['name', 'description']);
    if (!details) return { feature: before, details };
    const feature = await updateFeatureRow(trx, before.id, input);
    await bumpCatalogVersion(trx, organizationId);
    return { feature, details };
  });
}

export async function getFeature(
  db: Kysely<Database>,
  organizationId: string,
  key: string,
): Promise<Feature> {
  const feature = await findFeature(db, organizationId, key);
  if (!feature) throw featureNotFound(key);
  return feature;
}

/** The organization's features, ordered by key, one page. */
export function listFeatures(
  db: Kysely<Database>,
  organizationId: string,
  request: PageRequest<FeatureListFilter>,
): Promise<Page<Feature>> {
  return paginate(
    request,
    { find: (key) => findFeature(db, organizationId, key), what: 'a feature key of this organization' },
    (filter) => listFeatureRows(db, organizationId, filter),
  );
}
