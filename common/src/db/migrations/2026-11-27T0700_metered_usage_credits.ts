import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// Credits survive a Redis that comes back empty (issue 35): besides `used`, a balance's durable copy keeps what
// credits covered of it (`covered`, the hash's `k`) and the period's rollover amount (`rollover`, its `ro`), taken
// by the worker in the same read as `used`, so a refill puts back a consistent balance.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE metered_usage
      ADD COLUMN covered bigint NOT NULL DEFAULT 0 CHECK (covered >= 0),
      ADD COLUMN rollover bigint NOT NULL DEFAULT 0 CHECK (rollover >= 0);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE metered_usage DROP COLUMN rollover, DROP COLUMN covered;
  `.execute(db);
}
