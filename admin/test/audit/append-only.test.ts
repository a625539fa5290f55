import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { TEST_APP_ROLE } from '../../../test-support/databases.ts';
import { auditLog } from './log.ts';

let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Audit org');
});
afterAll(() => ctx.close());

const { countRows, uniqueKey, createFeature } = auditLog(() => ({ ctx, org }));

describe('append-only in the database', () => {
  it('refuses UPDATE, DELETE and TRUNCATE to the services role', async () => {
    for (const table of ['audit_events', 'audit_outcomes', 'audit_settle_marks'] as const) {
      await expect(
        sql`UPDATE ${sql.table(table)} SET recorded_at = recorded_at`.execute(ctx.db),
      ).rejects.toThrow(/permission denied/);
      await expect(sql`DELETE FROM ${sql.table(table)}`.execute(ctx.db)).rejects.toThrow(/permission denied/);
      await expect(sql`TRUNCATE ${sql.table(table)} CASCADE`.execute(ctx.db)).rejects.toThrow(
        /permission denied/,
      );
    }
    const grants = await sql<{ table_name: string; privilege_type: string }>`
      SELECT table_name, privilege_type FROM information_schema.role_table_grants
      WHERE grantee = ${TEST_APP_ROLE} AND table_name LIKE 'audit_%' ORDER BY 1, 2`.execute(ctx.ownerDb);
    expect(grants.rows).toEqual([
      { table_name: 'audit_events', privilege_type: 'INSERT' },
      { table_name: 'audit_events', privilege_type: 'SELECT' },
      { table_name: 'audit_outcomes', privilege_type: 'INSERT' },
      { table_name: 'audit_outcomes', privilege_type: 'SELECT' },
      { table_name: 'audit_settle_marks', privilege_type: 'INSERT' },
      { table_name: 'audit_settle_marks', privilege_type: 'SELECT' },
    ]);
    const owners = await sql<{ tableowner: string }>`
      SELECT tableowner FROM pg_tables WHERE tablename LIKE 'audit_%'`.execute(ctx.ownerDb);
    expect(owners.rows.every((row) => row.tableowner !== TEST_APP_ROLE)).toBe(true);
  });

  it('refuses UPDATE, DELETE and TRUNCATE to the owner too (triggers)', async () => {
    await createFeature(uniqueKey('kept'), 'Kept');
    const before = await countRows();
    expect(before.events).toBeGreaterThan(0);
    await sql`INSERT INTO audit_settle_marks (settled_before) VALUES ('2000-01-01')`.execute(ctx.ownerDb);
    for (const table of ['audit_events', 'audit_outcomes', 'audit_settle_marks'] as const) {
      await expect(
        sql`UPDATE ${sql.table(table)} SET recorded_at = recorded_at`.execute(ctx.ownerDb),
      ).rejects.toThrow(/append-only/);
      await expect(sql`DELETE FROM ${sql.table(table)}`.execute(ctx.ownerDb)).rejects.toThrow(/append-only/);
      await expect(sql`TRUNCATE ${sql.table(table)} CASCADE`.execute(ctx.ownerDb)).rejects.toThrow(
        /append-only/,
      );
    }
    expect(await countRows()).toEqual(before);
  });
});
