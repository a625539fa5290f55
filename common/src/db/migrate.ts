import { Migrator, sql, type Kysely, type MigrationResultSet } from 'kysely';
import pg from 'pg';
import { createDb, databaseNameOf, userOf, withDatabase } from './connect.ts';
import type { Database } from './database.ts';
import { migrations } from './migrations/index.ts';

/** Tables whose rows may only ever be added: the services' role gets INSERT and SELECT on them, nothing else. */
const isAppendOnlyTable = (table: string): boolean => table.startsWith('audit_');

const quoteIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`;

async function ensureDatabaseExists(ownerUrl: string): Promise<void> {
  const database = databaseNameOf(ownerUrl);
  const client = new pg.Client({ connectionString: withDatabase(ownerUrl, 'postgres') });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (found.rowCount === 0) {
      try {
        await client.query(`CREATE DATABASE ${quoteIdent(database)}`);
      } catch (error) {
        if ((error as { code?: string }).code !== '42P04') throw error; // created concurrently
      }
    }
  } finally {
    await client.end();
  }
}

async function ensureAppRole(db: Kysely<Database>, appRole: string): Promise<void> {
  await sql`
    DO $$ BEGIN
      CREATE ROLE ${sql.raw(quoteIdent(appRole))} LOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END $$;
  `.execute(db);
}

async function grantAppPrivileges(db: Kysely<Database>, appRole: string, database: string): Promise<void> {
  const role = sql.raw(quoteIdent(appRole));
  await sql`GRANT CONNECT ON DATABASE ${sql.raw(quoteIdent(database))} TO ${role}`.execute(db);
  await sql`GRANT USAGE ON SCHEMA public TO ${role}`.execute(db);
  await sql`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO ${role}`.execute(db);
  const tables = await sql<{ tablename: string }>`
    SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename NOT LIKE 'kysely_%'
  `.execute(db);
  for (const { tablename } of tables.rows) {
    const table = sql.raw(quoteIdent(tablename));
    await sql`REVOKE ALL ON ${table} FROM ${role}`.execute(db);
    const rights = isAppendOnlyTable(tablename) ? 'SELECT, INSERT' : 'SELECT, INSERT, UPDATE, DELETE';
    await sql`GRANT ${sql.raw(rights)} ON ${table} TO ${role}`.execute(db);
  }
}

export interface MigrateOptions {
  ownerUrl: string;
  /** The services' connection URL; its user becomes the restricted role. */
  appUrl: string;
}

/**
 * Creates the database and the restricted role if missing, applies pending migrations as the owner,
 * and (re)grants the role exactly what it may do. Safe to run any number of times.
 */
export async function migrateToLatest({ ownerUrl, appUrl }: MigrateOptions): Promise<MigrationResultSet> {
  await ensureDatabaseExists(ownerUrl);
  const db = createDb(ownerUrl, { max: 2 });
  try {
    const appRole = userOf(appUrl);
    if (appRole !== userOf(ownerUrl)) await ensureAppRole(db, appRole);
    const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
    const result = await migrator.migrateToLatest();
    if (result.error) throw result.error;
    if (appRole !== userOf(ownerUrl)) await grantAppPrivileges(db, appRole, databaseNameOf(ownerUrl));
    return result;
  } finally {
    await db.destroy();
  }
}
