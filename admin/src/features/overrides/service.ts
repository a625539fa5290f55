import { transact } from '@ent/common/outbox/record';
import type { Kysely, Transaction } from 'kysely';
import type { Database, Feature, FeatureKind, Override } from '@ent/common/db/database';
import { notFound, validationError } from '@ent/common/errors/app-error';
import type { OverrideBody, PutOverrideBody } from '@ent/contract/overrides';
import type { AuditDetails, WriteOutcome } from '../shared/write/outcome.ts';
import { parseDateTime } from '@ent/common/http/date-time';
import { findFeature } from '../features/service.ts';
import { changedFields, type Change } from '../shared/changes.ts';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';
import { bumpSubscriberVersion } from '../shared/versions.ts';
import { findSubscriber, lockSubscriber, subscriberNotFound } from '../subscribers/service.ts';
import {
  deleteOverrideRow,
  findOverride,
  findOverrideById,
  insertOverride,
  listOverrides,
  updateOverrideRow,
  type OverrideColumns,
  type OverrideListFilter,
  type OverrideWithFeature,
} from './store.ts';

type Db = Kysely<Database> | Transaction<Database>;

export function toOverrideBody(override: OverrideWithFeature): OverrideBody {
  const value =
    override.feature_kind === 'flag'
      ? { allowed: override.allowed ?? false }
      : { limit: override.limit_value };
  return {
    id: override.id,
    subscriber_id: override.subscriber_id,
    feature: override.feature_key,
    kind: override.feature_kind,
    ...value,
    expires_at: override.expires_at ? override.expires_at.toISOString() : null,
    created_at: override.created_at.toISOString(),
    updated_at: override.updated_at.toISOString(),
  };
}

const featureNotFound = (key: string) =>
  notFound(`No feature with key "${key}".`, { field: 'feature_key', value: key });
const overrideNotFound = (subscriberId: string, key: string) =>
  notFound(`The subscriber "${subscriberId}" has no override for the feature "${key}".`, {
    field: 'feature_key',
    value: key,
  });

/** The value an override body sets, once its shape matches its kind. */
export type OverrideValue =
  | { kind: 'flag'; allowed: boolean; expiresAt: Date | null }
  | { kind: 'limit' | 'metered'; limit: number | null; expiresAt: Date | null };

/**
 * Checks the rules that depend on `kind`: a flag sets `allowed` only, a limit or metered override sets `limit` only
 * (a metered override replaces the limit; reset, anchor and soft stay the grant's).
 */
function overrideValueFrom(body: PutOverrideBody): OverrideValue {
  const expiresAt = body.expires_at == null ? null : new Date(parseDateTime(body.expires_at));
  if (expiresAt && Number.isNaN(expiresAt.getTime())) {
    throw validationError('expires_at is not a valid ISO 8601 timestamp.', {
      field: 'expires_at',
      value: body.expires_at,
    });
  }
  if (body.kind === 'flag') {
    if (body.limit !== undefined)
      throw validationError('A flag override sets allowed, not limit.', { field: 'limit' });
    if (body.allowed === undefined)
      throw validationError('allowed is required for a flag override.', { field: 'allowed' });
    return { kind: 'flag', allowed: body.allowed, expiresAt };
  }
  if (body.allowed !== undefined)
    throw validationError(`A ${body.kind} override sets limit, not allowed.`, { field: 'allowed' });
  if (body.limit === undefined) {
    throw validationError(
      `limit is required for a ${body.kind} override (an integer >= 0, or null for unlimited).`,
      {
        field: 'limit',
      },
    );
  }
  return { kind: body.kind, limit: body.limit, expiresAt };
}

async function featureOrThrow(db: Db, organizationId: string, key: string): Promise<Feature> {
  const feature = await findFeature(db, organizationId, key);
  if (!feature) throw featureNotFound(key);
  return feature;
}

async function subscriberExistsOrThrow(db: Db, organizationId: string, subscriberId: string): Promise<void> {
  if (!(await findSubscriber(db, organizationId, subscriberId))) throw subscriberNotFound(subscriberId);
}

const valueField = (kind: FeatureKind) => (kind === 'flag' ? 'allowed' : 'limit');

/** The override as the audit log and responses show it: `allowed` or `limit`, timestamps as strings. */
function auditedValues(override: Pick<Override, 'feature_kind' | 'allowed' | 'limit_value' | 'expires_at'>) {
  return {
    [valueField(override.feature_kind)]:
      override.feature_kind === 'flag' ? override.allowed : override.limit_value,
    expires_at: override.expires_at ? override.expires_at.toISOString() : null,
  };
}

/** The override written; its audit details are what was created, or the changes (null when it was already so). */
export async function upsertOverride(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  subscriberId: string,
  featureKey: string,
  body: PutOverrideBody,
): Promise<OverrideWithFeature> {
  const upserted = (override: OverrideWithFeature, details: AuditDetails) => {
    outcome.details = details;
    outcome.raise('override.upserted', toOverrideBody(override));
    return override;
  };
  const value = overrideValueFrom(body);
  return transact(db, async (trx) => {
    if (!(await lockSubscriber(trx, organizationId, subscriberId))) throw subscriberNotFound(subscriberId);
    const feature = await featureOrThrow(trx, organizationId, featureKey);
    if (feature.kind !== value.kind) {
      throw validationError(
        `The feature "${feature.key}" is a ${feature.kind}; the override kind must be "${feature.kind}".`,
        {
          field: 'kind',
          value: value.kind,
          expected: feature.kind,
        },
      );
    }
    const columns: OverrideColumns = {
      allowed: value.kind === 'flag' ? value.allowed : null,
      limit_value: value.kind === 'flag' ? null : value.limit,
      expires_at: value.expiresAt,
    };
    const existing = await findOverride(trx, organizationId, subscriberId, feature.id);
    if (!existing) {
      const created = await insertOverride(trx, organizationId, subscriberId, feature, columns);
      await bumpSubscriberVersion(trx, outcome, organizationId, subscriberId);
      const override = { ...created, feature_key: feature.key };
      return upserted(override, { override_id: override.id, kind: feature.kind, ...auditedValues(override) });
    }
    const before = auditedValues(existing);
    const after = auditedValues({ feature_kind: feature.kind, ...columns });
    const details: Record<string, Change> | null = changedFields(before, after, [
      valueField(feature.kind),
      'expires_at',
    ]);
    if (!details) {
      outcome.unchangedOn({ subscriber: subscriberId });
      return existing;
    }
    const updated = await updateOverrideRow(trx, existing.id, columns);
    await bumpSubscriberVersion(trx, outcome, organizationId, subscriberId);
    return upserted({ ...updated, feature_key: feature.key }, details);
  });
}

export async function getOverride(
  db: Kysely<Database>,
  organizationId: string,
  subscriberId: string,
  featureKey: string,
): Promise<OverrideWithFeature> {
  await subscriberExistsOrThrow(db, organizationId, subscriberId);
  const feature = await featureOrThrow(db, organizationId, featureKey);
  const override = await findOverride(db, organizationId, subscriberId, feature.id);
  if (!override) throw overrideNotFound(subscriberId, featureKey);
  return override;
}

export async function listSubscriberOverrides(
  db: Kysely<Database>,
  organizationId: string,
  subscriberId: string,
  request: PageRequest<OverrideListFilter>,
): Promise<Page<OverrideWithFeature>> {
  await subscriberExistsOrThrow(db, organizationId, subscriberId);
  // The list is in feature-key order and its cursor is a feature key; an override's own id (what a client walking
  // lists by each item's `id` sends) names the same place.
  const cursor = request.startingAfter;
  const byId = cursor?.startsWith('ovr_')
    ? await findOverrideById(db, organizationId, subscriberId, cursor)
    : undefined;
  return paginate(
    byId ? { ...request, startingAfter: byId.feature_key } : request,
    {
      find: async (featureKey) => {
        const feature = await findFeature(db, organizationId, featureKey);
        return feature && findOverride(db, organizationId, subscriberId, feature.id);
      },
      what: "the feature key of one of this subscriber's overrides",
    },
    (filter) => listOverrides(db, organizationId, subscriberId, filter),
  );
}

/** Deleting an override that does not exist changes nothing and is not an error; returns the deleted one. */
export async function deleteOverride(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  subscriberId: string,
  featureKey: string,
): Promise<OverrideWithFeature | undefined> {
  return transact(db, async (trx) => {
    if (!(await lockSubscriber(trx, organizationId, subscriberId))) throw subscriberNotFound(subscriberId);
    const feature = await featureOrThrow(trx, organizationId, featureKey);
    const deleted = await deleteOverrideRow(trx, organizationId, subscriberId, feature.id);
    if (!deleted) {
      outcome.unchangedOn({ subscriber: subscriberId });
      return undefined;
    }
    await bumpSubscriberVersion(trx, outcome, organizationId, subscriberId);
    const override = { ...deleted, feature_key: feature.key };
    outcome.raise('override.deleted', toOverrideBody(override));
    return override;
  });
}
