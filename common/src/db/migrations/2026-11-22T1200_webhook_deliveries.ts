import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE webhook_deliveries (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES organizations (id),
      event_id text NOT NULL UNIQUE,
      event_type text NOT NULL,
      payload text NOT NULL,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed', 'canceled')),
      attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
      last_status_code integer,
      last_error text,
      next_attempt_at timestamptz,
      delivered_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX webhook_deliveries_organization ON webhook_deliveries (organization_id, id);
    CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';

    ALTER TABLE invites ADD COLUMN token_ciphertext text;

    ALTER TABLE webhooks ADD COLUMN disabled_reason text;

    CREATE UNIQUE INDEX members_organization_email ON members (organization_id, lower(email))
      WHERE email IS NOT NULL AND status <> 'removed';
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX members_organization_email;
    ALTER TABLE webhooks DROP COLUMN disabled_reason;
    ALTER TABLE invites DROP COLUMN token_ciphertext;
    DROP TABLE webhook_deliveries;
  `.execute(db);
}
