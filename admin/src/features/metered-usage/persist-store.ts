import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { meteredMember } from '@ent/common/redis/keys';
import { spentFiguresJson } from '../credits/worker/spent.ts';
import type { DrainedBalance } from './balance-scripts.ts';
import type { UsageThreshold } from './thresholds.ts';

type Trx = Transaction<Database>;

interface UpsertedBalances {
  /** Rows written (inserted, or updated over an older revision). */
  persisted: number;
  /** The watched balances among them (those whose write may reach a threshold). */
  written: DrainedBalance[];
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
 * One upsert statement (unnest: one array per column, so its text and its ten parameters stay the same whatever the
 * batch), each row only over an older revision. RETURNING only when asked: most batches need the count alone. A
 * balance read with its credit-spent hash keeps that hash's figures (`credit_spent`, at the drain's `figureSeq`); one
 * read without it keeps the figures its row already holds.
 */
async function upsert(
  trx: Trx,
  organizationId: string,
  balances: readonly DrainedBalance[],
  returning: boolean,
  figureSeq: number,
): Promise<{
  count: number;
  rows: { subscriber_id: string; feature_key: string; period_start_ms: number }[];
}> {
  const sorted = [...balances].sort(byKey);
  const result = await sql<{ subscriber_id: string; feature_key: string; period_start_ms: number }>`
    INSERT INTO metered_usage AS m
      (organization_id, subscriber_id, feature_key, period_start, period_end, used, revision, covered, rollover,
        credit_spent, credit_spent_seq)
    SELECT ${organizationId}, b.subscriber_id, b.feature_key,
      'epoch'::timestamptz + b.start_ms * interval '1 millisecond',
      'epoch'::timestamptz + b.end_ms * interval '1 millisecond',
      b.used, b.revision, b.covered, b.rollover,
      b.credit_spent, CASE WHEN b.credit_spent IS NULL THEN NULL ELSE ${figureSeq}::bigint END
    FROM unnest(
      ${sorted.map((b) => b.subscriberId)}::text[],
      ${sorted.map((b) => b.feature)}::text[],
      ${sorted.map((b) => b.periodStartMs)}::bigint[],
      ${sorted.map((b) => b.periodEndMs)}::bigint[],
      ${sorted.map((b) => b.used)}::bigint[],
      ${sorted.map((b) => b.revision)}::bigint[],
      ${sorted.map((b) => b.covered)}::bigint[],
      ${sorted.map((b) => b.rollover)}::bigint[],
      ${sorted.map((b) => (b.creditHash ? spentFiguresJson(b.creditHash.fields) : null))}::jsonb[]
    ) WITH ORDINALITY AS b (subscriber_id, feature_key, start_ms, end_ms, used, revision, covered, rollover, credit_spent,
      n)
    ORDER BY b.n
    ON CONFLICT (organization_id, subscriber_id, feature_key, period_start) DO UPDATE
      SET used = excluded.used, revision = excluded.revision, period_end = excluded.period_end,
        covered = excluded.covered, rollover = excluded.rollover,
        credit_spent = COALESCE(excluded.credit_spent, m.credit_spent),
        credit_spent_seq = COALESCE(excluded.credit_spent_seq, m.credit_spent_seq), updated_at = now()
      WHERE m.revision < excluded.revision
    ${
      returning
        ? sql`RETURNING m.subscriber_id, m.feature_key,
      (extract(epoch FROM m.period_start) * 1000)::bigint AS period_start_ms`
        : sql``
    }
  `.execute(trx);
  return { count: Number(result.numAffectedRows ?? result.rows.length), rows: result.rows };
}

/**
 * Upserts balances into metered_usage, each only over an older revision (a drain that lost a race to a newer one
 * writes nothing). Answers how many rows it wrote, and which of the `watched` balances it wrote: those are told
 * apart with RETURNING, in a statement of their own, so a batch with no threshold in reach (nearly every one)
 * returns no rows at all. Rows of one organization are written by one drain at a time (its drain lock), so two
 * statements, each in key order, cannot deadlock against another writer.
 */
export async function upsertBalances(
  trx: Trx,
  organizationId: string,
  balances: readonly DrainedBalance[],
  watched: (balance: DrainedBalance) => boolean,
  figureSeq: number,
): Promise<UpsertedBalances> {
  const watchedBalances: DrainedBalance[] = [];
  const others: DrainedBalance[] = [];
  for (const balance of balances) (watched(balance) ? watchedBalances : others).push(balance);
  let persisted = 0;
  if (others.length > 0) persisted += (await upsert(trx, organizationId, others, false, figureSeq)).count;
  if (watchedBalances.length === 0) return { persisted, written: [] };
  const { count, rows } = await upsert(trx, organizationId, watchedBalances, true, figureSeq);
  const writtenKeys = new Set(
    rows.map((row) => meteredMember(row.subscriber_id, row.feature_key, Number(row.period_start_ms))),
  );
  const written = watchedBalances.filter((balance) => writtenKeys.has(balance.member));
  return { persisted: persisted + count, written };
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
