import { sql, type Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { BALANCE_SETTLED_AFTER_PERIOD_MS } from '@ent/common/metering/metered-period';

/**
 * How far back from its cutoff the sweep looks (index `metered_usage_settling`), so a run reads a month of periods,
 * not the whole history: a row it never folds (the sweep stopped for longer than this) stays right, only slower to
 * read.
 */
const SWEEP_WINDOW_MS = 30 * 86_400_000;

/**
 * Moves the credit figures of rows no drain can write again (periods ended more than BALANCE_SETTLED_AFTER_PERIOD_MS
 * ago) into the credits themselves, each where it is newer than the credit's own (`spent_seq`), and clears them from the
 * rows: `credit_spent_now` then reads a subscriber's recent rows only, however long its history. One statement per
 * batch of rows (FOR UPDATE SKIP LOCKED: several workers share the work); a credit's figure moves only forward in
 * sequence, so a drain's newer write, before or after, stays the one read. The credits it moves are locked first in
 * (organization_id, id) order (`locked`: its LockRows sits above its Sort), with the lock the UPDATE takes anyway, as
 * the drain locks them (spent.ts), so the two cannot deadlock: an UPDATE ... FROM alone locks in the order its join's
 * plan yields rows. Answers the rows cleared.
 */
export async function foldSettledCreditFigures(
  db: Kysely<Database>,
  nowMs: number,
  options: { batchSize: number; maxBatches: number } = { batchSize: 1000, maxBatches: 20 },
): Promise<number> {
  const cutoff = new Date(nowMs - BALANCE_SETTLED_AFTER_PERIOD_MS);
  const windowStart = new Date(cutoff.getTime() - SWEEP_WINDOW_MS);
  let cleared = 0;
  for (let batch = 0; batch < options.maxBatches; batch++) {
    const result = await sql`
      WITH settled AS (
        SELECT organization_id, subscriber_id, feature_key, period_start, credit_spent, credit_spent_seq
        FROM metered_usage
        WHERE period_end < ${cutoff} AND period_end >= ${windowStart} AND credit_spent IS NOT NULL
        LIMIT ${options.batchSize}
        FOR UPDATE SKIP LOCKED
      ), latest AS (
        SELECT DISTINCT ON (s.organization_id, figure.key)
          s.organization_id, figure.key AS credit_id, figure.value::bigint AS spent, s.credit_spent_seq AS seq
        FROM settled s, jsonb_each_text(s.credit_spent) AS figure
        ORDER BY s.organization_id, figure.key, s.credit_spent_seq DESC
      ), locked AS MATERIALIZED (
        SELECT c.organization_id, c.id, l.spent, l.seq
        FROM credits c JOIN latest l ON c.organization_id = l.organization_id AND c.id = l.credit_id
        WHERE l.seq > c.spent_seq
        ORDER BY c.organization_id, c.id
        FOR NO KEY UPDATE OF c
      ), folded AS (
        UPDATE credits AS c SET spent = k.spent, spent_seq = k.seq
        FROM locked k
        WHERE c.organization_id = k.organization_id AND c.id = k.id AND k.seq > c.spent_seq
      )
      UPDATE metered_usage AS m SET credit_spent = NULL, credit_spent_seq = NULL
      FROM settled s
      WHERE m.organization_id = s.organization_id AND m.subscriber_id = s.subscriber_id
        AND m.feature_key = s.feature_key AND m.period_start = s.period_start
    `.execute(db);
    const rows = Number(result.numAffectedRows ?? 0);
    cleared += rows;
    if (rows < options.batchSize) break;
  }
  return cleared;
}
