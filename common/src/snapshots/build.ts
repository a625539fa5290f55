import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import { isRole, isScope, type Role } from '../auth/scopes.ts';
import type { Database, PlanGrantsTable } from '../db/database.ts';
import {
  snapshotVersionOf,
  type ApiKeyDoc,
  type CatalogDoc,
  type CatalogPlan,
  type CreditDoc,
  type Grant,
  type OverrideValue,
  type SubscriberDoc,
  type Versioned,
} from './documents.ts';

type Db = Kysely<Database>;

/**
 * `column = ANY($1)` with the ids as one array parameter: a batch's thousand ids as an `IN` list were a thousand bind
 * parameters for Kysely to compile, node-pg to send and Postgres to parse and plan, four times per publish.
 */
const isOneOf = (column: string, ids: readonly string[]) => sql<boolean>`${sql.ref(column)} = ANY(${ids}::text[])`;

/** Every document is read inside one REPEATABLE READ transaction, so the version matches the content. */
const consistentRead = <T>(db: Db, read: (trx: Transaction<Database>) => Promise<T>): Promise<T> =>
  db.transaction().setIsolationLevel('repeatable read').execute(read);

type GrantRow = Pick<
  Selectable<PlanGrantsTable>,
  'feature_kind' | 'limit_value' | 'reset' | 'reset_anchor' | 'soft' | 'rollover_max'
>;

/** A metered grant's columns are set by the table's CHECK; the fallbacks are DESIGN.md §5's defaults. */
function grantOf(row: GrantRow): Grant {
  if (row.feature_kind === 'flag') return { kind: 'flag' };
  if (row.feature_kind === 'limit') return { kind: 'limit', limit: row.limit_value };
  return {
    kind: 'metered',
    limit: row.limit_value,
    reset: row.reset ?? 'month',
    anchor: row.reset_anchor ?? 'calendar',
    soft: row.soft ?? false,
    rollover: row.rollover_max,
  };
}

/** The catalog document and its version; null when the organization does not exist. */
export async function buildCatalog(db: Db, organizationId: string): Promise<Versioned<CatalogDoc> | null> {
  return consistentRead(db, async (trx) => {
    const org = await trx
      .selectFrom('organizations')
      .select('catalog_version')
      .where('id', '=', organizationId)
      .executeTakeFirst();
    if (!org) return null;
    const [features, plans, grants] = await Promise.all([
      trx
        .selectFrom('features')
        .select(['id', 'key', 'kind'])
        .where('organization_id', '=', organizationId)
        .execute(),
      trx
        .selectFrom('plans')
        .select(['id', 'archived_at'])
        .where('organization_id', '=', organizationId)
        .execute(),
      trx
        .selectFrom('plan_grants as g')
        .innerJoin('plans as p', 'p.id', 'g.plan_id')
        .innerJoin('features as f', 'f.id', 'g.feature_id')
        .select([
          'g.plan_id',
          'f.key',
          'g.feature_kind',
          'g.limit_value',
          'g.reset',
          'g.reset_anchor',
          'g.soft',
        ])
        .select('g.rollover_max')
        .where('p.organization_id', '=', organizationId)
        .execute(),
    ]);
    const doc: CatalogDoc = { features: {}, plans: {} };
    for (const feature of features.sort((a, b) => (a.key < b.key ? -1 : 1)))
      doc.features[feature.key] = feature.kind;
    for (const plan of plans) doc.plans[plan.id] = { archived: plan.archived_at !== null, grants: {} };
    for (const grant of grants) {
      const plan: CatalogPlan | undefined = doc.plans[grant.plan_id];
      if (!plan) continue;
      plan.grants[grant.key] = grantOf(grant);
    }
    return { version: snapshotVersionOf(org.catalog_version), doc };
  });
}

/** Subscriber documents by subscriber id; ids that do not exist are absent from the map. */
export async function buildSubscribers(
  db: Db,
  organizationId: string,
  subscriberIds: readonly string[],
): Promise<Map<string, Versioned<SubscriberDoc>>> {
  const result = new Map<string, Versioned<SubscriberDoc>>();
  if (subscriberIds.length === 0) return result;
  const ids = [...new Set(subscriberIds)];
  return consistentRead(db, async (trx) => {
    const [subscribers, subscriptions, overrides, credits] = await Promise.all([
      trx
        .selectFrom('subscribers')
        .select(['subscriber_id', 'version'])
        .where('organization_id', '=', organizationId)
        .where(isOneOf('subscriber_id', ids))
        .execute(),
      trx
        .selectFrom('subscriptions')
        .select(['subscriber_id', 'plan_id', 'anchored_at'])
        .where('organization_id', '=', organizationId)
        .where(isOneOf('subscriber_id', ids))
        .where('status', '=', 'active')
        .orderBy('id')
        .execute(),
      trx
        .selectFrom('overrides as o')
        .innerJoin('features as f', 'f.id', 'o.feature_id')
        .select(['o.subscriber_id', 'f.key', 'o.feature_kind', 'o.allowed', 'o.limit_value', 'o.expires_at'])
        .where('o.organization_id', '=', organizationId)
        .where(isOneOf('o.subscriber_id', ids))
        .execute(),
      unexpiredCredits(trx, organizationId, ids),
    ]);
    for (const row of subscribers) {
      result.set(row.subscriber_id, {
        version: snapshotVersionOf(row.version),
        doc: { exists: true, plans: [], overrides: {} },
      });
    }
    for (const row of subscriptions) {
      const doc = result.get(row.subscriber_id)?.doc;
      if (!doc) continue;
      doc.plans.push(row.plan_id);
      const anchoredAt = row.anchored_at.getTime();
      const subscribedAt = (doc.subscribedAt ??= {});
      const known = subscribedAt[row.plan_id];
      if (known === undefined || anchoredAt < known) subscribedAt[row.plan_id] = anchoredAt;
    }
    for (const row of overrides) {
      const entry = result.get(row.subscriber_id);
      if (!entry) continue;
      const expiresAt = row.expires_at ? row.expires_at.getTime() : null;
      const value: OverrideValue =
        row.feature_kind === 'flag'
          ? { kind: 'flag', allowed: row.allowed === true, expiresAt }
          : { kind: row.feature_kind, limit: row.limit_value, expiresAt };
      entry.doc.overrides[row.key] = value;
    }
    for (const row of credits) {
      const entry = result.get(row.subscriber_id);
      if (!entry) continue;
      const byFeature = (entry.doc.credits ??= {});
      (byFeature[row.key] ??= []).push(creditDocOf(row));
    }
    return result;
  });
}

/**
 * Credits not voided whose expiry is ahead of the database's clock, scheduled ones included (issue 35): the gateway
 * decides which are live with its own clock, so each takes effect and expires at its instant on every gateway.
 * In spending order (priority, soonest expiry with none last, oldest, id), the order the gateway spends them in.
 */
const unexpiredCredits = (trx: Transaction<Database>, organizationId: string, ids: readonly string[]) =>
  trx
    .selectFrom('credits as c')
    .innerJoin('features as f', 'f.id', 'c.feature_id')
    .select([
      'c.subscriber_id',
      'f.key',
      'c.id',
      'c.amount',
      'c.priority',
      'c.effective_at',
      'c.expires_at',
      'c.created_at',
    ])
    .where('c.organization_id', '=', organizationId)
    .where(isOneOf('c.subscriber_id', ids))
    .where('c.voided_at', 'is', null)
    .where((eb) => eb.or([eb('c.expires_at', 'is', null), eb('c.expires_at', '>', sql<Date>`now()`)]))
    .orderBy('c.priority')
    .orderBy(sql`c.expires_at ASC NULLS LAST`)
    .orderBy('c.created_at')
    .orderBy('c.id')
    .execute();

type CreditRow = Awaited<ReturnType<typeof unexpiredCredits>>[number];

const creditDocOf = (row: CreditRow): CreditDoc => ({
  id: row.id,
  amount: row.amount,
  priority: row.priority,
  effectiveAt: row.effective_at.getTime(),
  expiresAt: row.expires_at ? row.expires_at.getTime() : null,
  createdAt: row.created_at.getTime(),
});

export interface ApiKeySnapshot {
  keyHash: string;
  organizationId: string;
  authVersion: number;
  /** null: revoked, or its member is not active. */
  doc: ApiKeyDoc | null;
}

/** An API key with the service account and member that hold it: what admin's key check and the snapshot read. */
export const keyWithHolder = (db: Kysely<Database> | Transaction<Database>) =>
  db
    .selectFrom('api_keys as k')
    .innerJoin('service_accounts as sa', 'sa.id', 'k.service_account_id')
    .innerJoin('members as m', 'm.id', 'sa.member_id')
    .select([
      'k.id',
      'k.key_hash',
      'k.organization_id',
      'k.key_prefix',
      'k.scopes',
      'k.revoked_at',
      'sa.id as service_account_id',
      'm.id as member_id',
      'm.role',
      'm.status',
    ]);

/** A key that authenticates: not revoked, its member active with a role this version knows. */
export const isLiveKey = <Row extends { revoked_at: Date | null; status: string; role: string }>(
  row: Row,
): row is Row & { role: Role } => row.revoked_at === null && row.status === 'active' && isRole(row.role);

const keyQuery = (trx: Transaction<Database>) =>
  keyWithHolder(trx).innerJoin('organizations as o', 'o.id', 'k.organization_id').select('o.auth_version');

type KeyRow = Awaited<ReturnType<ReturnType<typeof keyQuery>['execute']>>[number];

function toApiKeySnapshot(row: KeyRow): ApiKeySnapshot {
  const authVersion = snapshotVersionOf(row.auth_version);
  const active = isLiveKey(row);
  return {
    keyHash: row.key_hash,
    organizationId: row.organization_id,
    authVersion,
    doc: active
      ? {
          organizationId: row.organization_id,
          memberId: row.member_id,
          serviceAccountId: row.service_account_id,
          keyId: row.id,
          keyPrefix: row.key_prefix,
          role: row.role as ApiKeyDoc['role'],
          keyScopes: row.scopes.filter(isScope),
          authVersion,
        }
      : null,
  };
}

/** The key's principal by SHA-256 hash; null when no such key was ever issued. */
export async function buildApiKey(db: Db, keyHash: string): Promise<ApiKeySnapshot | null> {
  return consistentRead(db, async (trx) => {
    const row = await keyQuery(trx).where('k.key_hash', '=', keyHash).executeTakeFirst();
    return row ? toApiKeySnapshot(row) : null;
  });
}

/** Every key of the organization (revoked ones with a null doc) and the organization's auth version. */
export async function buildOrganizationApiKeys(
  db: Db,
  organizationId: string,
): Promise<{ authVersion: number; keys: ApiKeySnapshot[] } | null> {
  return consistentRead(db, async (trx) => {
    const org = await trx
      .selectFrom('organizations')
      .select('auth_version')
      .where('id', '=', organizationId)
      .executeTakeFirst();
    if (!org) return null;
    const rows = await keyQuery(trx).where('k.organization_id', '=', organizationId).execute();
    return { authVersion: snapshotVersionOf(org.auth_version), keys: rows.map(toApiKeySnapshot) };
  });
}
