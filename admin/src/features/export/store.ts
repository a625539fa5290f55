import { sql, type Transaction } from 'kysely';
import { CREDIT_COLUMNS } from '@ent/common/db/credit-columns';
import type { Credit, Database, Feature, FeatureKind, Plan } from '@ent/common/db/database';
import type { GrantRow } from '../plans/grants.ts';

type Trx = Transaction<Database>;

export type ExportedGrant = GrantRow & { plan_id: string };

/** The catalog is bounded (catalog limits): read whole, ordered by key. */
export function exportedFeatures(trx: Trx, organizationId: string): Promise<Feature[]> {
  return trx
    .selectFrom('features')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .orderBy('key')
    .execute();
}

export async function exportedPlans(
  trx: Trx,
  organizationId: string,
): Promise<{ plans: Plan[]; grants: ExportedGrant[] }> {
  const plans = await trx
    .selectFrom('plans')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .orderBy('key')
    .execute();
  const grants = await trx
    .selectFrom('plan_grants as g')
    .innerJoin('plans as p', 'p.id', 'g.plan_id')
    .innerJoin('features as f', 'f.id', 'g.feature_id')
    .select([
      'g.plan_id',
      'f.key as feature',
      'g.feature_kind as kind',
      'g.limit_value as limit',
      'g.reset',
      'g.reset_anchor as resetAnchor',
      'g.soft',
      'g.rollover_max as rolloverMax',
    ])
    .where('p.organization_id', '=', organizationId)
    .orderBy('f.key')
    .execute();
  return { plans, grants };
}

export function subscriberPage(
  trx: Trx,
  organizationId: string,
  after: string | null,
  size: number,
): Promise<{ subscriber_id: string; name: string | null }[]> {
  let query = trx
    .selectFrom('subscribers')
    .select(['subscriber_id', 'name'])
    .where('organization_id', '=', organizationId);
  if (after !== null) query = query.where('subscriber_id', '>', after);
  return query.orderBy('subscriber_id').limit(size).execute();
}

/**
 * The last subscriber id of the window of `size` subscribers after `after` (null when fewer remain): windows of
 * subscribers bound the subscription and override pages, so each page is sorted by a natural key in memory of
 * its own size while the scan follows the (organization, subscriber) indexes.
 */
export async function subscriberWindowEnd(
  trx: Trx,
  organizationId: string,
  after: string | null,
  size: number,
): Promise<string | null> {
  let query = trx
    .selectFrom('subscribers')
    .select('subscriber_id')
    .where('organization_id', '=', organizationId);
  if (after !== null) query = query.where('subscriber_id', '>', after);
  const row = await query
    .orderBy('subscriber_id')
    .offset(size - 1)
    .limit(1)
    .executeTakeFirst();
  return row?.subscriber_id ?? null;
}

export interface SubscriberWindow {
  after: string | null;
  /** Inclusive; null = to the end. */
  through: string | null;
}

export function activeSubscriptionsIn(
  trx: Trx,
  organizationId: string,
  window: SubscriberWindow,
): Promise<{ subscriber_id: string; plan_key: string; anchored_at: Date }[]> {
  let query = trx
    .selectFrom('subscriptions as s')
    .innerJoin('plans as p', 'p.id', 's.plan_id')
    .select(['s.subscriber_id', 'p.key as plan_key', 's.anchored_at'])
    .where('s.organization_id', '=', organizationId)
    .where('s.status', '=', 'active');
  if (window.after !== null) query = query.where('s.subscriber_id', '>', window.after);
  if (window.through !== null) query = query.where('s.subscriber_id', '<=', window.through);
  return query.orderBy('s.subscriber_id').orderBy('p.key').execute();
}

export interface ExportedOverride {
  subscriber_id: string;
  feature: string;
  kind: FeatureKind;
  allowed: boolean | null;
  limit: number | null;
  expires_at: Date | null;
}

export function overridesIn(
  trx: Trx,
  organizationId: string,
  window: SubscriberWindow,
): Promise<ExportedOverride[]> {
  let query = trx
    .selectFrom('overrides as o')
    .innerJoin('features as f', 'f.id', 'o.feature_id')
    .select([
      'o.subscriber_id',
      'f.key as feature',
      'o.feature_kind as kind',
      'o.allowed',
      'o.limit_value as limit',
      'o.expires_at',
    ])
    .where('o.organization_id', '=', organizationId);
  if (window.after !== null) query = query.where('o.subscriber_id', '>', window.after);
  if (window.through !== null) query = query.where('o.subscriber_id', '<=', window.through);
  return query.orderBy('o.subscriber_id').orderBy('f.key').execute();
}

/**
 * Credits neither voided nor expired at the snapshot's clock (what the gateway's snapshot carries): the others are
 * history, as canceled subscriptions are. By subscriber, then credit id.
 */
export function creditsIn(
  trx: Trx,
  organizationId: string,
  window: SubscriberWindow,
): Promise<(Credit & { feature_key: string })[]> {
  let query = trx
    .selectFrom('credits as c')
    .innerJoin('features as f', 'f.id', 'c.feature_id')
    .select([...CREDIT_COLUMNS, 'f.key as feature_key'])
    .where('c.organization_id', '=', organizationId)
    .where('c.voided_at', 'is', null)
    .where((eb) => eb.or([eb('c.expires_at', 'is', null), eb('c.expires_at', '>', sql<Date>`now()`)]));
  if (window.after !== null) query = query.where('c.subscriber_id', '>', window.after);
  if (window.through !== null) query = query.where('c.subscriber_id', '<=', window.through);
  return query.orderBy('c.subscriber_id').orderBy('c.id').execute();
}
