import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// Where a credit's spent figure is persisted (issue 35, decisions.md "A credit's spent, persisted in its balance's
// row"). The worker drains a balance that met credits together with its subscriber's credit-spent hash, and used to
// write each figure into its own `credits` row: a second row per drained balance, most of what persisting a spending
// consume cost beyond one without credits. It now writes the hash's figures into the balance's own row
// (`credit_spent`, credit id -> spent, with `credit_spent_seq`: a number the drain takes from `credit_figure_seq`
// under the organization's drain lock, so the latest drain's figures are told apart; a sequence, not the transaction
// id, since pg_dump keeps its value and a restore into a new cluster restarts transaction ids), and `credits.spent` keeps what was written to the credit itself (an import, a drain of
// the hash alone) with `spent_seq` likewise. `credit_spent_now(credit)` answers the latest of them, reading the
// subscriber's rows of the credit's feature (the primary key's prefix); the credit-expiry sweep folds the rows no
// drain can write again into the credits, so those stay few (admin/src/features/credits/worker/fold.ts).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE metered_usage
      ADD COLUMN credit_spent jsonb,
      ADD COLUMN credit_spent_seq bigint;
    ALTER TABLE credits ADD COLUMN spent_seq bigint NOT NULL DEFAULT 0;
    CREATE SEQUENCE credit_figure_seq;
    -- The sweep's window of periods that ended a month before its cutoff. Not partial on credit_spent: a column an
    -- index's predicate names counts as indexed, and the drain's updates of it would no longer be HOT.
    CREATE INDEX metered_usage_settling ON metered_usage (period_end);
    CREATE FUNCTION credit_spent_now(c credits) RETURNS bigint
      LANGUAGE sql STABLE PARALLEL SAFE
      AS $$
        SELECT COALESCE(
          (SELECT (m.credit_spent ->> c.id)::bigint
           FROM metered_usage m
           WHERE m.organization_id = c.organization_id AND m.subscriber_id = c.subscriber_id
             AND m.feature_key = (SELECT f.key FROM features f WHERE f.id = c.feature_id)
             AND m.credit_spent_seq > c.spent_seq AND m.credit_spent ? c.id
           ORDER BY m.credit_spent_seq DESC
           LIMIT 1),
          c.spent)
      $$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP FUNCTION credit_spent_now(credits);
    DROP INDEX metered_usage_settling;
    DROP SEQUENCE credit_figure_seq;
    ALTER TABLE credits DROP COLUMN spent_seq;
    ALTER TABLE metered_usage DROP COLUMN credit_spent_seq, DROP COLUMN credit_spent;
  `.execute(db);
}
