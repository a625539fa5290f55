import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { settleAudit } from '../../src/features/audit/settle.job.ts';
import { jobDefinitions } from '../../src/job-registry.ts';
import { auditLog, insertPendingEntry } from './log.ts';

let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Audit org');
});
afterAll(() => ctx.close());

const { inject, list, entryFor } = auditLog(() => ({ ctx, org }));

describe('settling entries left pending', () => {
  it('appends no_response to entries pending past the bound, once', async () => {
    const id = await insertPendingEntry(ctx.db, org, Date.now() - 10 * 60_000);
    const fresh = await inject('POST', '/org/features', { key: 'fresh', name: 'Fresh', kind: 'flag' });
    expect(fresh.statusCode).toBe(201);
    expect((await list('?outcome=pending')).audit_events.map((e) => e.id)).toEqual([id]);

    const definition = jobDefinitions.find((d) => d.queue === 'audit-settle')!;
    expect(definition.repeatEveryMs).toBeGreaterThan(0);
    const processor = definition.processor({ ...ctx, queues: {} as never });
    expect(await processor({ data: { olderThanMs: 5 * 60_000 } } as never)).toEqual({ settled: 1 });
    expect(await settleAudit(ctx, 5 * 60_000)).toBe(0);

    expect((await list('?outcome=pending')).audit_events).toEqual([]);
    const settled = (await list('?outcome=no_response')).audit_events;
    expect(settled.map((e) => [e.id, e.outcome, e.status, e.details])).toEqual([
      [id, 'no_response', null, null],
    ]);
    expect((await entryFor(fresh.headers['x-request-id'] as string)).outcome).toBe('responded');

    // After the mark, a request that never answers (recent, no outcome) is still found as pending.
    const recent = await insertPendingEntry(ctx.db, org, Date.now());
    expect((await list('?outcome=pending')).audit_events.map((e) => e.id)).toEqual([recent]);
    expect(await settleAudit(ctx, 5 * 60_000)).toBe(0);
    expect(await settleAudit({ db: ctx.db, clock: { now: () => Date.now() + 6 * 60_000 } }, 5 * 60_000)).toBe(
      1,
    );
    expect((await list('?outcome=pending')).audit_events).toEqual([]);
  });
});
