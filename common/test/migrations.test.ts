import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { withDatabase } from '@ent/common/db/connect';
import { migrateToLatest } from '@ent/common/db/migrate';
import { migrations } from '@ent/common/db/migrations/index';
import { TEST_APP_ROLE, TEST_OWNER_URL } from '../../test-support/databases.ts';

const databases: string[] = [];

/** A database name of its own for one case (created by the migration under test), dropped after the file. */
function freshDatabase() {
  const database = `ent_mig_${randomBytes(5).toString('hex')}`;
  databases.push(database);
  const appUrl = new URL(withDatabase(TEST_OWNER_URL, database));
  appUrl.username = TEST_APP_ROLE;
  return { ownerUrl: withDatabase(TEST_OWNER_URL, database), appUrl: appUrl.toString() };
}

async function query<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}

afterAll(async () => {
  for (const database of databases) await query(TEST_OWNER_URL, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
});

describe('migrations', () => {
  it('create the database from nothing, then run clean a second time with nothing to apply', async () => {
    const { ownerUrl, appUrl } = freshDatabase();
    const first = await migrateToLatest({ ownerUrl, appUrl });
    expect(first.results?.map((r) => r.migrationName)).toEqual(Object.keys(migrations));
    expect(first.results?.every((r) => r.status === 'Success')).toBe(true);
    const second = await migrateToLatest({ ownerUrl, appUrl });
    expect(second.results ?? []).toEqual([]);
  });

  it('leave the services\' role owning nothing, with only INSERT and SELECT on the audit tables', async () => {
    const { ownerUrl, appUrl } = freshDatabase();
    await migrateToLatest({ ownerUrl, appUrl });
    const owned = await query<{ tablename: string }>(
      ownerUrl,
      `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tableowner = '${TEST_APP_ROLE}'`,
    );
    expect(owned).toEqual([]);
    const rights = await query<{ table_name: string; privilege_type: string }>(
      ownerUrl,
      `SELECT table_name, privilege_type FROM information_schema.role_table_grants
       WHERE grantee = '${TEST_APP_ROLE}' AND table_name LIKE 'audit_%' ORDER BY table_name, privilege_type`,
    );
    const byTable = new Map<string, string[]>();
    for (const { table_name, privilege_type } of rights) byTable.set(table_name, [...(byTable.get(table_name) ?? []), privilege_type]);
    expect(byTable.size).toBeGreaterThan(0);
    for (const privileges of byTable.values()) expect(privileges.sort()).toEqual(['INSERT', 'SELECT']);
  });

  it('are what `entctl migrate` runs, and it says so when there is nothing to do', () => {
    const { ownerUrl, appUrl } = freshDatabase();
    const migrate = () =>
      spawnSync(process.execPath, ['--import', 'tsx', 'admin/src/cli/entctl.ts', 'migrate', '--json'], {
        env: { ...process.env, DATABASE_OWNER_URL: ownerUrl, DATABASE_URL: appUrl },
        encoding: 'utf8',
        timeout: 30_000,
      });
    const first = migrate();
    expect(first.status, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toEqual({ applied: Object.keys(migrations) });
    const second = migrate();
    expect(second.status, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout)).toEqual({ applied: [] });
    // Two CLI processes started one after the other: each tsx start of entctl took about 8 s at a load of 25 on
    // two cores, so the suite's 30 s did not fit both plus the migrations (each spawn keeps its own 30 s bound).
  }, 90_000);
});
