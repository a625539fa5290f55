import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { withDatabase } from '@ent/common/db/connect';
import { migrateToLatest } from '@ent/common/db/migrate';

/** The Postgres server tests use; the owner (superuser) creates and drops databases. */
export const TEST_OWNER_URL =
  process.env.TEST_DATABASE_OWNER_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const TEST_APP_ROLE = 'entitlements_app';

const migrationsDir = new URL('../common/src/db/migrations/', import.meta.url).pathname;

/** Template name changes whenever any migration file changes, so a stale template is never reused. */
function templateName(): string {
  const hash = createHash('sha256');
  for (const file of readdirSync(migrationsDir).sort()) {
    hash.update(file).update(readFileSync(join(migrationsDir, file)));
  }
  return `ent_tpl_${hash.digest('hex').slice(0, 12)}`;
}

async function withAdminClient<T>(run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: TEST_OWNER_URL });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

const appUrlFor = (database: string) => {
  const url = new URL(withDatabase(TEST_OWNER_URL, database));
  url.username = TEST_APP_ROLE;
  return url.toString();
};

/** Migrates a template database once per migration set; concurrent runs wait on an advisory lock. */
export async function ensureTemplate(): Promise<string> {
  const template = templateName();
  await withAdminClient(async (client) => {
    await client.query('SELECT pg_advisory_lock(727274)');
    try {
      const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [template]);
      if (exists.rowCount) return;
      const building = `${template}_building`;
      await client.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
      await migrateToLatest({
        ownerUrl: withDatabase(TEST_OWNER_URL, building),
        appUrl: appUrlFor(building),
      });
      await client.query(`ALTER DATABASE ${building} RENAME TO ${template}`);
    } finally {
      await client.query('SELECT pg_advisory_unlock(727274)');
    }
  });
  return template;
}

export interface TestDatabase {
  name: string;
  /** As the services connect: the restricted role. */
  appUrl: string;
  /** As migrations connect: the owner. */
  ownerUrl: string;
  drop(): Promise<void>;
}

/**
 * A fresh database cloned from the migrated template, private to one test file; `migrated: false` gives an empty
 * one, for a test that runs the migrations itself.
 */
export async function createTestDatabase({ migrated = true } = {}): Promise<TestDatabase> {
  const template = migrated ? templateName() : 'template0';
  const name = `ent_t_${randomBytes(6).toString('hex')}`;
  await withAdminClient(async (client) => {
    for (let attempt = 0; ; attempt++) {
      try {
        await client.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
        return;
      } catch (error) {
        // Another clone of the same template may be in progress; it finishes in milliseconds.
        if ((error as { code?: string }).code !== '55006' || attempt >= 50) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  });
  return {
    name,
    appUrl: appUrlFor(name),
    ownerUrl: withDatabase(TEST_OWNER_URL, name),
    drop: () =>
      withAdminClient((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(
        () => undefined,
      ),
  };
}
