import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// Idempotency-Key on admin writes (DESIGN.md §5): one row per organization and key, reserved inside the write's
// transaction (so a rolled-back write leaves no key) and completed with the response it answered. A row whose
// expires_at has passed counts as absent; it is overwritten by the next use of its key and pruned in bounded
// batches.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE idempotency_keys (
      organization_id text NOT NULL REFERENCES organizations (id),
      key text NOT NULL,
      fingerprint text NOT NULL,
      response_status integer,
      response_content_type text,
      response_body text,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (organization_id, key)
    );
    CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE idempotency_keys;`.execute(db);
}
