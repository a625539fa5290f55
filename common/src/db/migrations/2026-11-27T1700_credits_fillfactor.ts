import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// The worker rewrites a spent credit's `spent` about once a second while the credit is being spent (issue 35),
// touching no indexed column. As for metered_usage (2026-11-27T1500), 70 % leaves room on the row's page for the
// update to stay in place (HOT): no new entry in the credits' four indexes per persisted figure.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE credits SET (fillfactor = 70)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE credits RESET (fillfactor)`.execute(db);
}
