import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { ndjson } from './run-import.ts';

// An upload's staging inserts run on a pool of their own with a 60 s statement timeout: one insert stalled past the
// ordinary 10 s (here: another transaction holds a lock on import_lines for 11 s) no longer fails the whole upload
// with 503.

const STALL_MS = 11_000;

let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Staging stall');
});
afterAll(() => ctx.close());

describe('an import upload', () => {
  it('waits out a staging insert stalled past the ordinary statement timeout', async () => {
    const holder = await ctx.ownerDb.startTransaction().execute();
    let holderOpen = true;
    try {
      await sql`LOCK TABLE import_lines IN SHARE MODE`.execute(holder);
      const upload = ctx.app.inject({
        method: 'POST',
        url: '/org/imports',
        headers: { ...org.headers, 'content-type': 'application/x-ndjson' },
        payload: ndjson([{ type: 'subscriber', subscriber_id: 'cus_stall' }]),
      });
      // Busy, not idle in its transaction (Postgres ends a session idle in one for 10 s), and each statement under the
      // owner pool's own 10 s timeout.
      for (let slept = 0; slept < STALL_MS; slept += STALL_MS / 2)
        await sql`SELECT pg_sleep(${STALL_MS / 2 / 1000})`.execute(holder);
      await holder.commit().execute();
      holderOpen = false;
      const res = await upload;
      expect(res.statusCode, res.body).toBe(202);
      await ctx.app.imports.runner.idle();
      const done = await ctx.app.inject({
        method: 'GET',
        url: `/org/imports/${res.json().import_id}`,
        headers: org.headers,
      });
      expect(done.json()).toMatchObject({ status: 'succeeded', applied: 1 });
    } finally {
      if (holderOpen) await holder.rollback().execute();
    }
  }, 30_000);
});
