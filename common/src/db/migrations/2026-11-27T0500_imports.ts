import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// Bulk import (DESIGN.md §5): the body is staged line by line as it streams in (`receiving`), then applied in
// batches, each batch's records, line results and the import's cursor committed in one transaction (`running`).
// The lease says which process applies it; a lease that expired belongs to a process that died, and the next
// admin start or worker sweep resumes from `applied_through` (docs/decisions.md, "Bulk import").
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE imports (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES organizations (id),
      member_id text NOT NULL,
      request_id text NOT NULL,
      status text NOT NULL CHECK (status IN ('receiving', 'running', 'succeeded', 'failed')),
      dry_run boolean NOT NULL,
      lines integer NOT NULL DEFAULT 0,
      applied integer NOT NULL DEFAULT 0,
      unchanged integer NOT NULL DEFAULT 0,
      failed integer NOT NULL DEFAULT 0,
      applied_through integer NOT NULL DEFAULT 0,
      sha256 text,
      failure text,
      lease_owner text,
      lease_expires_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz,
      CHECK ((status IN ('succeeded', 'failed')) = (finished_at IS NOT NULL))
    );
    CREATE INDEX imports_organization ON imports (organization_id, id);
    CREATE INDEX imports_unfinished ON imports (lease_expires_at) WHERE status IN ('receiving', 'running');

    CREATE TABLE import_lines (
      import_id text NOT NULL REFERENCES imports (id) ON DELETE CASCADE,
      line integer NOT NULL CHECK (line >= 1),
      type text,
      key text,
      record jsonb,
      result text NOT NULL CHECK (result IN ('pending', 'applied', 'unchanged', 'failed')),
      error jsonb,
      PRIMARY KEY (import_id, line)
    );
    CREATE INDEX import_lines_failed ON import_lines (import_id, line) WHERE result = 'failed';

    -- Statistics after a large import: ANALYZE needs the tables' owner, which the services' role is not.
    CREATE FUNCTION analyze_imported_tables() RETURNS void LANGUAGE plpgsql SECURITY DEFINER
      SET search_path = public AS $$
    BEGIN
      ANALYZE subscribers;
      ANALYZE subscriptions;
      ANALYZE overrides;
    END $$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP FUNCTION analyze_imported_tables(); DROP TABLE import_lines, imports;`.execute(db);
}
