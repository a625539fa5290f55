import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// The worker rewrites a balance's row about once a second while it changes (DESIGN.md §5), touching no indexed
// column. With free room on the row's page Postgres updates it in place (a HOT update: no new entry in the primary
// key nor in metered_usage_open); a full page moves the row and writes both indexes. 70 % leaves that room: the
// persist bench measured about a third less Postgres CPU per upserted balance (decisions.md, "The worker's drain").
// Pages already full keep their rows until those move once.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE metered_usage SET (fillfactor = 70)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE metered_usage RESET (fillfactor)`.execute(db);
}
