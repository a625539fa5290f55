import { sql, type Kysely } from 'kysely';

/** The organization's rate of metered usage events (reports and batch events) per second (DESIGN.md §5). */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE organizations
      ADD COLUMN usage_events_per_second integer NOT NULL DEFAULT 1000 CHECK (usage_events_per_second > 0);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE organizations DROP COLUMN usage_events_per_second;`.execute(db);
}
