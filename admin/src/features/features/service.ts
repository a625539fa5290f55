import { transact } from '@ent/common/outbox/record';
import type { Kysely } from 'kysely';
import type { Database, Feature } from '@ent/common/db/database';
import { conflict, notFound } from '@ent/common/errors/app-error';
import type { CreateFeatureBody, FeatureBody, UpdateFeatureBody } from '@ent/contract/features';
import { changedFields } from '../shared/changes.ts';
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
import { withOrganizationLocked } from '../shared/write/locks.ts';
import type { WriteOutcome } from '../shared/write/outcome.ts';

export const toFeatureBody = (feature: Feature): FeatureBody => ({
  key: feature.key,
  name: feature.name,
  description: feature.description,
  kind: feature.kind,
  created_at: feature.created_at.toISOString(),
  updated_at: feature.updated_at.toISOString(),
});

const featureNotFound = (key: string) =>
  notFound(`No feature with key "${key}".`, { field: 'key', value: key });

export async function createFeature(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  input: CreateFeatureBody,
  limits: CatalogLimits,
): Promise<Feature> {
  return transact(db, async (trx) => {
    await assertCatalogRoom(trx, organizationId, limits, { features: 1 });
    const created = await insertFeature(trx, organizationId, input);
    if (!created)
      throw conflict(`A feature with key "${input.key}" already exists.`, { field: 'key', value: input.key });
    await bumpCatalogVersion(trx, outcome, organizationId);
    outcome.details = { key: created.key, name: created.name, kind: created.kind };
    outcome.raise('feature.created', toFeatureBody(created));
    return created;
  });
}

/** The feature after the write; the outcome's details name what changed (null: nothing did). */
export async function updateFeature(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  key: string,
  input: UpdateFeatureBody,
): Promise<Feature> {
  return withOrganizationLocked(db, organizationId, async (trx) => {
    const before = await lockFeature(trx, organizationId, key);
    if (!before) throw featureNotFound(key);
    const details = changedFields(before, input, ['name', 'description']);
    if (!details) {
      outcome.unchangedOn({ catalog: true });
      return before;
    }
    const feature = await updateFeatureRow(trx, before.id, input);
    await bumpCatalogVersion(trx, outcome, organizationId);
    outcome.details = details;
    outcome.raise('feature.updated', toFeatureBody(feature));
    return feature;
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

/** A feature by key, and the features of some keys: what plans and overrides read in their own transactions. */
export { findFeature, findFeaturesByKeys } from './store.ts';
