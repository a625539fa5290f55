import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// The audit log: an entry (audit_events) is committed `pending` before a write runs; its outcome is a second,
// appended row (audit_outcomes, at most one per entry). Neither table is ever updated, deleted or truncated:
// the triggers refuse it for every role, and the services' role holds only SELECT and INSERT (migrate.ts).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE audit_events (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES organizations (id),
      occurred_at timestamptz NOT NULL,
      request_id text NOT NULL,
      actor_member_id text NOT NULL,
      actor_auth_type text NOT NULL CHECK (actor_auth_type IN ('member_apikey', 'member_session')),
      actor_key_prefix text NOT NULL,
      service text NOT NULL CHECK (service IN ('api', 'identity')),
      method text NOT NULL,
      route text NOT NULL,
      params jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(params) = 'object'),
      ip text NOT NULL,
      user_agent text,
      recorded_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX audit_events_org_id ON audit_events (organization_id, id DESC);
    CREATE INDEX audit_events_org_actor ON audit_events (organization_id, actor_member_id, id DESC);
    CREATE INDEX audit_events_org_route ON audit_events (organization_id, route, id DESC);
    CREATE INDEX audit_events_org_request ON audit_events (organization_id, request_id);
    CREATE INDEX audit_events_occurred ON audit_events (occurred_at);
    CREATE INDEX audit_events_params ON audit_events USING gin (params jsonb_path_ops);

    CREATE TABLE audit_outcomes (
      event_id text PRIMARY KEY REFERENCES audit_events (id),
      organization_id text NOT NULL,
      outcome text NOT NULL CHECK (outcome IN ('rejected', 'responded', 'no_response')),
      status integer CHECK (status BETWEEN 100 AND 599),
      details jsonb CHECK (details IS NULL OR jsonb_typeof(details) = 'object'),
      recorded_at timestamptz NOT NULL DEFAULT now(),
      CHECK ((outcome = 'responded') = (status IS NOT NULL))
    );
    CREATE INDEX audit_outcomes_org_outcome ON audit_outcomes (organization_id, outcome, event_id DESC);

    -- The settle job's progress: every entry that occurred before the latest mark has an outcome.
    CREATE TABLE audit_settle_marks (
      settled_before timestamptz PRIMARY KEY,
      recorded_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      RAISE EXCEPTION 'the audit log is append-only: % on % is refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
    END;
    $fn$;

    CREATE TRIGGER audit_events_refuse_row BEFORE UPDATE OR DELETE ON audit_events
      FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
    CREATE TRIGGER audit_events_refuse_statement BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_events
      FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();
    CREATE TRIGGER audit_outcomes_refuse_row BEFORE UPDATE OR DELETE ON audit_outcomes
      FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
    CREATE TRIGGER audit_outcomes_refuse_statement BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_outcomes
      FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();
    CREATE TRIGGER audit_settle_marks_refuse_row BEFORE UPDATE OR DELETE ON audit_settle_marks
      FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
    CREATE TRIGGER audit_settle_marks_refuse_statement BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_settle_marks
      FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE audit_settle_marks, audit_outcomes, audit_events;
    DROP FUNCTION audit_refuse_change();
  `.execute(db);
}
