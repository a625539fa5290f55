import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE organizations ADD COLUMN arrangement_version bigint NOT NULL DEFAULT 0;

    CREATE TABLE outbox (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      organization_id text NOT NULL REFERENCES organizations (id),
      kind text NOT NULL CHECK (kind IN ('catalog', 'subscriber', 'auth', 'arrangement')),
      subject text,
      version bigint NOT NULL CHECK (version >= 0),
      created_at timestamptz NOT NULL DEFAULT now(),
      attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
      next_attempt_at timestamptz NOT NULL DEFAULT now(),
      last_error text,
      done_at timestamptz,
      CHECK ((kind = 'subscriber') = (subject IS NOT NULL))
    );
    CREATE INDEX outbox_undone ON outbox (id) WHERE done_at IS NULL;
    CREATE INDEX outbox_undone_subject ON outbox (organization_id, kind, subject) WHERE done_at IS NULL;
    CREATE INDEX outbox_done ON outbox (done_at) WHERE done_at IS NOT NULL;

    CREATE INDEX subscribers_recently_changed ON subscribers (organization_id, updated_at);
    CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (updated_at) WHERE status = 'failed';
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX webhook_deliveries_failed;
    DROP INDEX subscribers_recently_changed;
    DROP TABLE outbox;
    ALTER TABLE organizations DROP COLUMN arrangement_version;
  `.execute(db);
}
