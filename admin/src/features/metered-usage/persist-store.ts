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
 * writes nothing). Answers the rows it wrote. One statement with one array per column (unnest), so its text and its
 * parameters stay the same size whatever the batch: nine parameters, not nine per row.
 */
export async function upsertBalances(
  trx: Trx,
  organizationId: string,
  balances: readonly DrainedBalance[],
): Promise<WrittenBalance[]> {
  if (balances.length === 0) return [];
  const sorted = [...balances].sort(byKey);
  const { rows } = await sql<{
    subscriber_id: string;
    feature_key: string;
    period_start_ms: number;
    period_end_ms: number | null;
    used: number;
  }>`
    INSERT INTO metered_usage AS m
      (organization_id, subscriber_id, feature_key, period_start, period_end, used, revision, covered, rollover)
    SELECT ${organizationId}, b.subscriber_id, b.feature_key,
      'epoch'::timestamptz + b.start_ms * interval '1 millisecond',
      'epoch'::timestamptz + b.end_ms * interval '1 millisecond',
      b.used, b.revision, b.covered, b.rollover
    FROM unnest(
      ${sorted.map((b) => b.subscriberId)}::text[],
      ${sorted.map((b) => b.feature)}::text[],
      ${sorted.map((b) => b.periodStartMs)}::bigint[],
      ${sorted.map((b) => b.periodEndMs)}::bigint[],
      ${sorted.map((b) => b.used)}::bigint[],
      ${sorted.map((b) => b.revision)}::bigint[],
      ${sorted.map((b) => b.covered)}::bigint[],
      ${sorted.map((b) => b.rollover)}::bigint[]
    ) WITH ORDINALITY AS b (subscriber_id, feature_key, start_ms, end_ms, used, revision, covered, rollover, n)
    ORDER BY b.n
    ON CONFLICT (organization_id, subscriber_id, feature_key, period_start) DO UPDATE
      SET used = excluded.used, revision = excluded.revision, period_end = excluded.period_end,
        covered = excluded.covered, rollover = excluded.rollover, updated_at = now()
      WHERE m.revision < excluded.revision
    RETURNING m.subscriber_id, m.feature_key,
      (extract(epoch FROM m.period_start) * 1000)::bigint AS period_start_ms,
      (extract(epoch FROM m.period_end) * 1000)::bigint AS period_end_ms,
      m.used
  `.execute(trx);
  return rows.map((row) => ({
    subscriberId: row.subscriber_id,
    feature: row.feature_key,
    periodStartMs: row.period_start_ms,
    periodEndMs: row.period_end_ms,
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
