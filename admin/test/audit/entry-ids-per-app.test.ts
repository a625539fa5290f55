import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/app.ts';
import {
  createAdminContext,
  createTestOrganization,
  ManualClock,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

// Audit entry ids are monotonic (a later id never sorts before an earlier one), and carry occurred_at. Each admin app
// keeps its own sequence: an app on a clock a day ahead (a test's ManualClock) once moved the ids, and so the
// occurred_at, of every app after it in the same process to its time.

const DAY_MS = 24 * 60 * 60 * 1000;

let ctx: AdminTestContext;
let org: TestOrganization;
let ahead: Awaited<ReturnType<typeof buildAdminApp>>;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Audit ids');
  ahead = await buildAdminApp({
    config: ctx.config,
    clock: new ManualClock(Date.now() + DAY_MS),
    db: ctx.db,
    redis: ctx.redis,
    logger: false,
  });
  await ahead.ready();
});
afterAll(async () => {
  await ahead?.close();
  await ctx?.close();
});

async function createFeature(app: typeof ahead, key: string): Promise<string> {
  const res = await app.inject({
    method: 'POST',
    url: '/org/features',
    headers: org.headers,
    payload: { key, name: key, kind: 'flag' },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.headers['x-request-id'] as string;
}

describe('audit entry ids', () => {
  it("follow each app's own clock, whatever another app in the process recorded before", async () => {
    const aheadRequest = await createFeature(ahead, 'written_ahead');
    const nowRequest = await createFeature(ctx.app, 'written_now');
    const res = await ctx.app.inject({ method: 'GET', url: '/org/audit-events', headers: org.headers });
    const events = res.json().audit_events as { request_id: string; occurred_at: string }[];
    const occurredAt = (requestId: string) =>
      Date.parse(events.find((e) => e.request_id === requestId)!.occurred_at);
    expect(Math.abs(occurredAt(nowRequest) - Date.now())).toBeLessThan(60_000);
    expect(occurredAt(aheadRequest) - Date.now()).toBeGreaterThan(DAY_MS - 60_000);
  });
});
