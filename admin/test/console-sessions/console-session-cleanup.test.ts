import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, createAdminContext, type AdminTestContext } from '../../../test-support/admin-context.ts';
import { ENDED_SESSION_RETENTION_MS, deleteEndedSessions, sessionCleanupJob } from '../../src/features/console-sessions/cleanup.job.ts';
import { signInAgain, signUp } from './browser.ts';

const NOW = Date.parse('2026-11-24T09:00:00.000Z');
const DAY_MS = 24 * 60 * 60 * 1000;
const clock = new ManualClock(NOW);
let ctx: AdminTestContext;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
});
afterAll(() => ctx.close());

const sessionsOf = (memberId: string) =>
  ctx.db.selectFrom('console_sessions').select(['id', 'expires_at', 'revoked_at']).where('member_id', '=', memberId).orderBy('id').execute();

const setTimes = (id: string, times: { revoked_at: Date }) =>
  ctx.ownerDb.updateTable('console_sessions').set(times).where('id', '=', id).execute();

describe('ended console sessions are deleted after 30 days', () => {
  it('deletes sessions that expired or were revoked more than 30 days ago, and keeps the rest', async () => {
    const longAgo = NOW - ENDED_SESSION_RETENTION_MS - 2 * DAY_MS;
    let user: Awaited<ReturnType<typeof signUp>>;
    try {
      clock.set(longAgo);
      user = await signUp(ctx, 'cleanup'); // expires 12 hours later: long ago
      await signInAgain(ctx, user); // revoked long ago, below
      clock.set(NOW - 2 * DAY_MS);
      await signInAgain(ctx, user); // revoked yesterday, below
    } finally {
      clock.set(NOW);
    }
    const live = await signInAgain(ctx, user);
    const [expiredLongAgo, revokedLongAgo, endedRecently, liveRow] = await sessionsOf(user.memberId);
    expect(expiredLongAgo!.expires_at.getTime()).toBeLessThan(NOW - ENDED_SESSION_RETENTION_MS);
    await setTimes(revokedLongAgo!.id, { revoked_at: new Date(longAgo + 60_000) });
    await setTimes(endedRecently!.id, { revoked_at: new Date(NOW - DAY_MS) });

    const { deleted } = await deleteEndedSessions({ db: ctx.db, clock });

    expect(deleted).toBeGreaterThanOrEqual(2);
    expect((await sessionsOf(user.memberId)).map((s) => s.id)).toEqual([endedRecently!.id, liveRow!.id]);
    expect((await live.call('GET', '/console/api/session')).statusCode).toBe(200);
  });

  it('works through more rows than one batch in one run', async () => {
    const user = await signUp(ctx, 'batches');
    for (let i = 0; i < 4; i++) await signInAgain(ctx, user);
    const longAgo = new Date(NOW - ENDED_SESSION_RETENTION_MS - DAY_MS);
    await ctx.ownerDb.updateTable('console_sessions').set({ revoked_at: longAgo }).where('member_id', '=', user.memberId).execute();

    await deleteEndedSessions({ db: ctx.db, clock }, { batchSize: 2 });

    expect(await sessionsOf(user.memberId)).toEqual([]);
  });

  it('repeats hourly as a worker job', () => {
    expect(sessionCleanupJob).toMatchObject({ queue: 'console-session-cleanup', repeatEveryMs: 60 * 60 * 1000 });
  });
});
