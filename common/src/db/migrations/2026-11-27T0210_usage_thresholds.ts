import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// DESIGN.md §5, thresholds: `usage.threshold_reached` goes out once per subscriber, feature, period and threshold.
// The worker that persists a balance inserts the thresholds it reached here, in the transaction that records the
// webhook delivery; the primary key makes the insert of an already reached threshold a no-op, so concurrent workers
// (or a balance persisted again) send it once. Rows stay with their period, like metered_usage's.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE usage_thresholds_reached (
      organization_id text NOT NULL REFERENCES organizations (id),
      subscriber_id text NOT NULL,
      feature_key text NOT NULL,
      period_start timestamptz NOT NULL,
      threshold smallint NOT NULL CHECK (threshold IN (80, 100)),
      used bigint NOT NULL CHECK (used >= 0),
      limit_value bigint NOT NULL CHECK (limit_value >= 0),
      reached_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (organization_id, subscriber_id, feature_key, period_start, threshold)
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE usage_thresholds_reached`.execute(db);
}
