import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { pidOf, someoneBlockedBy } from '../../../test-support/lock-waits.ts';
import { ndjson, runImport } from './run-import.ts';

// An upload's staging inserts run on a pool of their own with a 60 s statement timeout: one insert stalled past the
// app pool's (here 1 s: another transaction holds a lock on import_lines until the insert has waited 1.5 s) no longer
// fails the whole upload with 503.

const APP_STATEMENT_TIMEOUT_MS = 1_000;
const STALL_MS = 1_500;

let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext({ statementTimeoutMs: APP_STATEMENT_TIMEOUT_MS });
  org = await createTestOrganization(ctx.db, 'Staging stall');
});
afterAll(() => ctx.close());

describe('an import upload', () => {
  it("waits out a staging insert stalled past the app pool's statement timeout", async () => {
    const holder = await ctx.ownerDb.startTransaction().execute();
    let holderOpen = true;
    try {
      await sql`LOCK TABLE import_lines IN SHARE MODE`.execute(holder);
      const done = runImport(ctx, org, ndjson([{ type: 'subscriber', subscriber_id: 'cus_stall' }]));
      await someoneBlockedBy(ctx.ownerDb, await pidOf(holder));
      await sql`SELECT pg_sleep(${STALL_MS / 1000})`.execute(holder);
      await holder.commit().execute();
      holderOpen = false;
      expect(await done).toMatchObject({ status: 'succeeded', applied: 1 });
    } finally {
      if (holderOpen) await holder.rollback().execute();
    }
  }, 30_000);
});
