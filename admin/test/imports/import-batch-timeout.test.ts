import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { ndjson, runImport } from './run-import.ts';

// A batch whose statement reaches the statement timeout (here: another transaction holds the subscribers table, and
// admin's pool times statements out after 1 s) was rolled back whole; the runner tries it again with half its lines
// rather than failing the import. The holder lets go only once the runner has said it is trying again.

const RETRY_LOGGED = 'reached the statement timeout';
/** How long the holder keeps the table at most, waiting for the runner's retry (under Postgres's 10 s idle limit). */
const HOLD_DEADLINE_MS = 8_000;

const warnings: string[] = [];
let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext({
    statementTimeoutMs: 1_000,
    imports: { runner: { batchSize: 8 } },
    logger: {
      level: 'warn',
      stream: new Writable({
        write(chunk: Buffer, _encoding, done) {
          warnings.push(chunk.toString());
          done();
        },
      }),
    },
  });
  org = await createTestOrganization(ctx.db, 'Batch timeout');
});
afterAll(() => ctx.close());

const subscriberLines = (prefix: string) =>
  ndjson(
    Array.from({ length: 6 }, (_, i) => ({
      type: 'subscriber',
      subscriber_id: `${prefix}_${i}`,
      name: `S${i}`,
    })),
  );

/** Runs the import while another transaction holds the subscribers table until the runner has retried a batch. */
async function importPastATimeout(body: string, query = '') {
  warnings.length = 0;
  const holder = await ctx.ownerDb.startTransaction().execute();
  let holderOpen = true;
  try {
    await sql`LOCK TABLE subscribers IN SHARE MODE`.execute(holder);
    const done = runImport(ctx, org, body, query);
    // Busy in short statements (Postgres ends a session idle in its transaction), until the retry is logged.
    const deadline = Date.now() + HOLD_DEADLINE_MS;
    while (!warnings.some((w) => w.includes(RETRY_LOGGED)) && Date.now() < deadline)
      await sql`SELECT pg_sleep(0.05)`.execute(holder);
    await holder.commit().execute();
    holderOpen = false;
    return await done;
  } finally {
    if (holderOpen) await holder.rollback().execute();
  }
}

async function subscribersNamed(prefix: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM subscribers WHERE subscriber_id LIKE ${`${prefix}_%`}
  `.execute(ctx.db);
  return rows[0]!.n;
}

describe('an import batch that reaches the statement timeout', () => {
  it('is applied again with half its lines, and the import succeeds', async () => {
    const done = await importPastATimeout(subscriberLines('cus_late'));
    expect(warnings.join('')).toContain(
      'a batch of 8 lines reached the statement timeout; trying again with 4',
    );
    expect(done).toMatchObject({ status: 'succeeded', lines: 6, applied: 6, failed: 0 });
    expect(await subscribersNamed('cus_late')).toBe(6);
  }, 30_000);

  it('is checked again on a dry run, whose transaction the failed try leaves usable', async () => {
    const done = await importPastATimeout(subscriberLines('cus_dry'), '?dry_run=true');
    expect(warnings.join('')).toContain(RETRY_LOGGED);
    expect(done).toMatchObject({ status: 'succeeded', dry_run: true, lines: 6, applied: 6, failed: 0 });
    expect(await subscribersNamed('cus_dry')).toBe(0);
  }, 30_000);
});
