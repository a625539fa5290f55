import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import type { DrainedBalance } from './balance-scripts.ts';
import type { UsageThreshold } from './thresholds.ts';

type Trx = Transaction<Database>;

export interface WrittenBalance {
  subscriberId: string;
  feature: string;
  periodStartMs: number;
  periodEndMs: number | null;
  used: number;
}

/** Primary-key order, so concurrent writers lock rows in one order and cannot deadlock each other. */
const byKey = <T extends { subscriberId: string; feature: string; periodStartMs: number }>(a: T, b: T) =>
  a.subscriberId < b.subscriberId
    ? -1
    : a.subscriberId > b.subscriberId
      ? 1
      : a.feature < b.feature
        ? -1
        : a.feature > b.feature
          ? 1
          : a.periodStartMs - b.periodStartMs;

/**
 * Upserts balances into metered_usage, each only over an older revision (a drain that lost a race to a newer one
 * writes nothing). Answers the rows it wrote.
 */
export async function upsertBalances(
  trx: Trx,
  organizationId: string,
  balances: readonly DrainedBalance[],
): Promise<WrittenBalance[]> {
  if (balances.length === 0) return [];
  const rows = await trx
    .insertInto('metered_usage')
    .values(
      [...balances].sort(byKey).map((balance) => ({
        organization_id: organizationId,
        subscriber_id: balance.subscriberId,
        feature_key: balance.feature,
        period_start: new Date(balance.periodStartMs),
        period_end: balance.periodEndMs === null ? null : new Date(balance.periodEndMs),
        used: balance.used,
        revision: balance.revision,
      })),
    )
    .onConflict((conflict) =>
      conflict
        .columns(['organization_id', 'subscriber_id', 'feature_key', 'period_start'])
        .doUpdateSet((eb) => ({
          used: eb.ref('excluded.used'),
          revision: eb.ref('excluded.revision'),
          period_end: eb.ref('excluded.period_end'),
          updated_at: sql<Date>`now()`,
        }))
        .where((eb) => eb('metered_usage.revision', '<', eb.ref('excluded.revision'))),
    )
    .returning(['subscriber_id', 'feature_key', 'period_start', 'period_end', 'used'])
    .execute();
  return rows.map((row) => ({
    subscriberId: row.subscriber_id,
    feature: row.feature_key,
    periodStartMs: row.period_start.getTime(),
    periodEndMs: row.period_end === null ? null : row.period_end.getTime(),
    used: row.used,
  }));
}

export interface ReachedThreshold {
  subscriberId: string;
  feature: string;
  periodStartMs: number;
  threshold: UsageThreshold;
  used: number;
  limit: number;
}

/** Records thresholds reached; answers those not recorded before (the ones whose webhook goes out now). */
export async function recordReachedThresholds(
  trx: Trx,
  organizationId: string,
  reached: readonly ReachedThreshold[],
): Promise<ReachedThreshold[]> {
  if (reached.length === 0) return [];
  const sorted = [...reached].sort((a, b) => byKey(a, b) || a.threshold - b.threshold);
  const rows = await trx
    .insertInto('usage_thresholds_reached')
    .values(
      sorted.map((entry) => ({
        organization_id: organizationId,
        subscriber_id: entry.subscriberId,
        feature_key: entry.feature,
        period_start: new Date(entry.periodStartMs),
        threshold: entry.threshold,
        used: entry.used,
        limit_value: entry.limit,
      })),
    )
    .onConflict((conflict) => conflict.doNothing())
    .returning(['subscriber_id', 'feature_key', 'period_start', 'threshold'])
    .execute();
  const recorded = new Set(
    rows.map(
      (row) => `${row.subscriber_id}|${row.feature_key}|${row.period_start.getTime()}|${row.threshold}`,
    ),
  );
  return sorted.filter((entry) =>
    recorded.has(`${entry.subscriberId}|${entry.feature}|${entry.periodStartMs}|${entry.threshold}`),
  );
}
