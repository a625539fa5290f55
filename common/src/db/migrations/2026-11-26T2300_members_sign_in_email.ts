import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// A console sign-in may name no organization: it finds every membership of a person by lower(email) across
// organizations, which members_organization_email (organization first) cannot serve without a scan.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX members_user_email ON members (lower(email))
      WHERE kind = 'user' AND email IS NOT NULL AND status <> 'removed';
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX members_user_email`.execute(db);
}
