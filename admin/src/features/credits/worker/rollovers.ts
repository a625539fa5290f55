import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { DEFAULT_CREDIT_PRIORITY } from '@ent/contract/credits';
import type { DomainEvent } from '../../shared/write/outcome.ts';
import { toCreditBody } from '../body.ts';

/**
 * A rollover credit as the gateway's Lua records it when it first creates a period's balance with something left
 * over from the previous one: field `ro:<credit id>` of the credit-spent hash, value
 * `<amount>|<source period start ms>|<period start ms>|<period end ms>`.
 */
export interface Rollover {
  id: string;
  subscriberId: string;
  feature: string;
  amount: number;
  /** The period whose unused allowance it is. */
  sourcePeriodStartMs: number;
  /** The period it is spent in: effective (and created) at its start, expiring at its end. */
  startMs: number;
  endMs: number | null;
}

const ROLLOVER_FIELD = 'ro:';

/** The rollover a credit-spent hash field records; undefined for a spent figure or a malformed record. */
export function parseRolloverField(
  subscriberId: string,
  feature: string,
  field: string,
  value: string,
): Rollover | undefined {
  if (!field.startsWith(ROLLOVER_FIELD)) return undefined;
  const [amount, source, start, end] = value.split('|').map((part) => (part === '' ? null : Number(part)));
  if (!(amount! > 0) || source == null || start == null || !Number.isSafeInteger(amount)) return undefined;
  return {
    id: field.slice(ROLLOVER_FIELD.length),
    subscriberId,
    feature,
    amount: amount!,
    sourcePeriodStartMs: source,
    startMs: start,
    endMs: end ?? null,
  };
}

export const isRolloverField = (field: string): boolean => field.startsWith(ROLLOVER_FIELD);

/**
 * Records rollover credits as `credits` rows, each once however many workers race (ON CONFLICT DO NOTHING on the
 * key and on the one-per-(subscriber, feature, source period) index); answers the `credit.created` events of the
 * rows this call inserted.
 */
export async function recordRollovers(
  trx: Transaction<Database>,
  organizationId: string,
  rollovers: readonly Rollover[],
  nowMs: number,
): Promise<DomainEvent[]> {
  if (rollovers.length === 0) return [];
  // A rolling-over balance's hash keeps its rollover record for the period, so most drains of it carry one already
  // recorded: those are left out here, so that the subscribers' lock below is taken only when inserting.
  const recorded = await trx
    .selectFrom('credits')
    .select('id')
    .where('organization_id', '=', organizationId)
    .where(
      'id',
      'in',
      rollovers.map((rollover) => rollover.id),
    )
    .execute();
  const known = new Set(recorded.map((row) => row.id));
  const fresh = rollovers.filter((rollover) => !known.has(rollover.id));
  if (fresh.length === 0) return [];
  const [features, subscribers] = await Promise.all([
    trx
      .selectFrom('features')
      .select(['id', 'key'])
      .where('organization_id', '=', organizationId)
      .where('key', 'in', [...new Set(fresh.map((rollover) => rollover.feature))])
      .where('kind', '=', 'metered')
      .execute(),
    trx
      .selectFrom('subscribers')
      .select('subscriber_id')
      .where('organization_id', '=', organizationId)
      .where('subscriber_id', 'in', [...new Set(fresh.map((rollover) => rollover.subscriberId))])
      // The lock the credits' foreign key check takes, taken before inserting and in key order, as an import takes
      // its subscribers (FOR UPDATE) before inserting credits: inserting first, a drain could hold a rollover credit
      // an import is inserting too while its check waited for that import's lock (a deadlock).
      // Byte order, as every statement locking subscribers takes them (imports/subscriber-lock-order.ts).
      .orderBy(sql`subscriber_id COLLATE "C"`)
      .forKeyShare()
      .execute(),
  ]);
  const featureIds = new Map(features.map((feature) => [feature.key, feature.id]));
  const present = new Set(subscribers.map((row) => row.subscriber_id));
  const rows = fresh
    .filter((rollover) => featureIds.has(rollover.feature) && present.has(rollover.subscriberId))
    .map((rollover) => {
      const start = new Date(rollover.startMs);
      return {
        id: rollover.id,
        organization_id: organizationId,
        subscriber_id: rollover.subscriberId,
        feature_id: featureIds.get(rollover.feature)!,
        name: null,
        amount: rollover.amount,
        priority: DEFAULT_CREDIT_PRIORITY,
        effective_at: start,
        expires_at: rollover.endMs === null ? null : new Date(rollover.endMs),
        source: 'rollover' as const,
        source_period_start: new Date(rollover.sourcePeriodStartMs),
        created_at: start,
      };
    })
    // Key order: concurrent writers insert in one order and cannot deadlock on each other.
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  if (rows.length === 0) return [];
  const inserted = await trx
    .insertInto('credits')
    .values(rows)
    .onConflict((conflict) => conflict.doNothing())
    .returningAll()
    .execute();
  const keyOf = new Map(features.map((feature) => [feature.id, feature.key]));
  return inserted.map((credit) => ({
    type: 'credit.created',
    data: { credit: toCreditBody({ ...credit, feature_key: keyOf.get(credit.feature_id)! }, 0, nowMs) },
  }));
}
