import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// Credits (DESIGN.md §5, issue 35): amounts added to a subscriber's metered allowance, spent after it. `spent` is
// the durable copy the worker writes from Redis (the hot copy); a void keeps it. A rollover credit is made by the
// gateway's Lua at a period's first touch and recorded here by the worker: the partial unique index makes that
// record idempotent (one per subscriber, feature and period, however many workers race). `expired_event_at` marks
// the credit.expired webhook as sent, so it goes out once.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE credits (
      id text NOT NULL,
      organization_id text NOT NULL REFERENCES organizations (id),
      subscriber_id text NOT NULL,
      feature_id text NOT NULL REFERENCES features (id),
      name text,
      amount bigint NOT NULL CHECK (amount > 0),
      spent bigint NOT NULL DEFAULT 0 CHECK (spent >= 0),
      priority integer NOT NULL CHECK (priority >= 1),
      effective_at timestamptz NOT NULL,
      expires_at timestamptz CHECK (expires_at IS NULL OR expires_at > effective_at),
      source text NOT NULL CHECK (source IN ('manual', 'rollover')),
      source_period_start timestamptz,
      voided_at timestamptz,
      expired_event_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      -- A rollover credit's id is made by the gateway from the subscriber, feature and period (not the
      -- organization): unique within its organization only.
      PRIMARY KEY (organization_id, id),
      CHECK ((source = 'rollover') = (source_period_start IS NOT NULL)),
      FOREIGN KEY (organization_id, subscriber_id) REFERENCES subscribers (organization_id, subscriber_id)
    );
    -- The list route (newest first) and the snapshot build (a subscriber's credits).
    CREATE INDEX credits_by_subscriber ON credits (organization_id, subscriber_id, created_at DESC, id DESC);
    CREATE UNIQUE INDEX credits_rollover_once ON credits (organization_id, subscriber_id, feature_id, source_period_start)
      WHERE source = 'rollover';
    -- The worker's credit.expired sweep: credits whose expiry passed and whose event has not gone out.
    CREATE INDEX credits_expiry_pending ON credits (expires_at)
      WHERE expired_event_at IS NULL AND voided_at IS NULL AND expires_at IS NOT NULL;

    -- A metered grant's rollover max (null: no rollover); only metered grants may carry one.
    ALTER TABLE plan_grants
      ADD COLUMN rollover_max bigint CHECK (rollover_max IS NULL OR (feature_kind = 'metered' AND rollover_max > 0));
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE plan_grants DROP COLUMN rollover_max;
    DROP TABLE credits;
  `.execute(db);
}
