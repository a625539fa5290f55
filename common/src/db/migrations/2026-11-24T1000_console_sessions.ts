import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// The console's people: a password per user member (scrypt, self-describing: `scrypt$N$r$p$salt$hash`) and
// cookie sessions, each stored by the SHA-256 of its token and of its CSRF token (a database dump reveals
// neither). Sign-in finds a person by (organization, lower(email)) through members_organization_email, the
// partial unique index of 2026-11-22T1200 (users not removed), so no new index is needed for it.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE member_passwords (
      member_id text PRIMARY KEY,
      organization_id text NOT NULL,
      password_hash text NOT NULL CHECK (password_hash LIKE 'scrypt$%'),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      FOREIGN KEY (organization_id, member_id) REFERENCES members (organization_id, id)
    );

    CREATE TABLE console_sessions (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      member_id text NOT NULL,
      token_hash text NOT NULL UNIQUE,
      token_prefix text NOT NULL,
      csrf_hash text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      revoked_at timestamptz,
      FOREIGN KEY (organization_id, member_id) REFERENCES members (organization_id, id),
      CHECK (expires_at > created_at)
    );
    -- Ending a member's sessions (password change, suspension, removal) touches only the live ones.
    CREATE INDEX console_sessions_member_live ON console_sessions (member_id) WHERE revoked_at IS NULL;
    CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE console_sessions, member_passwords;
  `.execute(db);
}
