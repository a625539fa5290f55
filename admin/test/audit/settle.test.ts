import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyPrefixOf } from '@ent/common/auth/api-key';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { auditEntryIds } from '../../src/features/audit/entry.ts';
import { settleAudit } from '../../src/features/audit/settle.job.ts';
import { jobDefinitions } from '../../src/jobs/registry.ts';
import { auditLog } from './log.ts';

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
    const newAuditEntryId = auditEntryIds();
    const { id, occurredAt } = newAuditEntryId(Date.now() - 10 * 60_000);
    const insertPending = (entryId: string, at: Date) =>
      ctx.db
        .insertInto('audit_events')
        .values({
          id: entryId,
          organization_id: org.organization_id,
          occurred_at: at,
          request_id: 'req_01kpendingpendingpendingpe',
          actor_member_id: org.member_id,
          actor_auth_type: 'member_apikey',
          actor_key_prefix: keyPrefixOf(org.api_key),
          service: 'api',
          method: 'POST',
          route: '/org/features',
          params: '{}',
          ip: '127.0.0.1',
          user_agent: null,
        })
        .execute();
    await insertPending(id, occurredAt);
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
    const recent = newAuditEntryId(Date.now());
    await insertPending(recent.id, recent.occurredAt);
    expect((await list('?outcome=pending')).audit_events.map((e) => e.id)).toEqual([recent.id]);
    expect(await settleAudit(ctx, 5 * 60_000)).toBe(0);
    expect(await settleAudit({ db: ctx.db, clock: { now: () => Date.now() + 6 * 60_000 } }, 5 * 60_000)).toBe(
      1,
    );
    expect((await list('?outcome=pending')).audit_events).toEqual([]);
  });
});
