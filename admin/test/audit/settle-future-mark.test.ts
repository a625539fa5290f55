import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminContext, createTestOrganization, type AdminTestContext, type TestOrganization } from '../../../test-support/admin-context.ts';
import { latestSettleMark } from '../../src/features/audit/store.ts';
import { settleAudit } from '../../src/features/audit/settle.job.ts';
import { insertPendingEntry } from './log.ts';

let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Settle mark org');
});
afterAll(() => ctx.close());

const MINUTE = 60_000;

const insertPending = (occurredAtMs: number) => insertPendingEntry(ctx.db, org, occurredAtMs);

const pendingIds = async (): Promise<string[]> => {
  const res = await ctx.app.inject({ method: 'GET', url: '/org/audit-events?outcome=pending', headers: org.headers });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { audit_events: { id: string }[] }).audit_events.map((e) => e.id);
};

describe('a settle mark dated in the future', () => {
  it('is ignored: the job still settles, and the pending filter still finds entries', async () => {
    const now = Date.now();
    const stale = await insertPending(now - 10 * MINUTE);
    // A bad row (clock skew on another worker, a manual insert): a mark a day ahead of every clock.
    const future = new Date(now + 24 * 60 * MINUTE);
    await sql`INSERT INTO audit_settle_marks (settled_before) VALUES (${future})`.execute(ctx.ownerDb);

    expect(await latestSettleMark(ctx.db, new Date(now))).toBeNull();
    expect(await latestSettleMark(ctx.db, new Date(future.getTime() + 1))).toEqual(future);
    // With the mark honoured, the filter would skip this entry (it is older than the mark).
    expect(await pendingIds()).toEqual([stale]);

    expect(await settleAudit({ db: ctx.db, clock: { now: () => now } }, 5 * MINUTE)).toBe(1);
    expect(await pendingIds()).toEqual([]);
    // The run recorded its own cutoff, which later runs (and the filter) use; the future mark still is not.
    expect(await latestSettleMark(ctx.db, new Date(now))).toEqual(new Date(now - 5 * MINUTE));

    const later = await insertPending(now - 2 * MINUTE);
    expect(await settleAudit({ db: ctx.db, clock: { now: () => now } }, 5 * MINUTE)).toBe(0);
    expect(await settleAudit({ db: ctx.db, clock: { now: () => now + 4 * MINUTE } }, 5 * MINUTE)).toBe(1);
    const outcome = await ctx.db.selectFrom('audit_outcomes').select('outcome').where('event_id', '=', later).executeTakeFirstOrThrow();
    expect(outcome.outcome).toBe('no_response');
  });
});
