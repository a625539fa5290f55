import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// The organization's monthly eval count lives only in Redis (the gate's usage hash per UTC month, kept 35 days
// past its month, on a Redis that may keep nothing on disk). The worker samples it into this table once a
// minute: one row per organization and UTC day holding the month's cumulative count as last seen that day, so
// past months and the daily series outlive both the hash and a Redis that restarts empty. A sample only ever
// raises `count` (GREATEST): a Redis that lost the hash must not lower a recorded figure.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE usage_days (
      organization_id text NOT NULL REFERENCES organizations (id),
      day date NOT NULL,
      period text NOT NULL CHECK (period ~ '^[0-9]{4}-[0-9]{2}$'),
      count bigint NOT NULL CHECK (count >= 0),
      -- The organization's allotment when sampled; null = unlimited.
      eval_limit bigint CHECK (eval_limit IS NULL OR eval_limit >= 0),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (organization_id, day),
      -- extract() rather than day::text, whose form follows the session's DateStyle.
      CHECK (
        period = lpad(extract(year FROM day)::int::text, 4, '0') || '-' || lpad(extract(month FROM day)::int::text, 2, '0')
      )
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE usage_days`.execute(db);
}
