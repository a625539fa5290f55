import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildSubscribers } from '@ent/common/snapshots/build';
import type { SubscriberDoc } from '@ent/common/snapshots/documents';
import {
  ManualClock,
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

// The app clock runs ahead of the database's (which decides "not yet expired" when a document is built), so a
// credit that expired by both clocks is made with instants in the past of both.
const NOW = Date.parse('2030-06-01T00:00:00.000Z');
const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();

let ctx: AdminTestContext;
let org: TestOrganization;
const clock = new ManualClock(NOW);

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
});
beforeEach(async () => {
  clock.set(NOW);
  org = await createTestOrganization(ctx.db, 'Snap');
  for (const key of ['api-calls', 'tokens']) {
    const res = await post('/org/features', { key, name: key, kind: 'metered' });
    expect(res.statusCode).toBe(201);
  }
  expect((await post('/org/subscribers', { subscriber_id: 'alice' })).statusCode).toBe(201);
});
afterAll(() => ctx.close());

const post = (url: string, payload: object) =>
  ctx.app.inject({ method: 'POST', url, headers: org.headers, payload });
const credit = async (payload: object): Promise<string> => {
  const res = await post('/org/subscribers/alice/credits', payload);
  expect(res.statusCode, res.body).toBe(201);
  return res.json().credit_id as string;
};
/** The subscriber document as Redis holds it for the gateways, and its version. */
const published = async (): Promise<{ v: number; doc: SubscriberDoc }> => {
  const hash = await ctx.redis.hgetall(ctx.app.redisKeys.subscriber(org.organization_id, 'alice'));
  return { v: Number(hash.v), doc: JSON.parse(hash.doc!) as SubscriberDoc };
};

describe('the subscriber snapshot carries credits', () => {
  it('by feature in spending order, scheduled included, voided and long-expired left out', async () => {
    const late = await credit({ feature: 'api-calls', amount: 5, priority: 20 });
    clock.set(NOW + 1000);
    const first = await credit({
      feature: 'api-calls',
      amount: 7,
      priority: 1,
      expires_at: iso(NOW + 9 * DAY),
    });
    const scheduled = await credit({
      feature: 'api-calls',
      amount: 3,
      effective_at: iso(NOW + DAY),
      expires_at: iso(NOW + 2 * DAY),
    });
    const tokens = await credit({ feature: 'tokens', amount: 11 });
    await credit({
      feature: 'tokens',
      amount: 1,
      effective_at: '2001-01-01T00:00:00Z',
      expires_at: '2001-02-01T00:00:00Z',
    });
    const voided = await credit({ feature: 'tokens', amount: 2 });
    const res = await ctx.app.inject({
      method: 'DELETE',
      url: `/org/subscribers/alice/credits/${voided}`,
      headers: org.headers,
    });
    expect(res.statusCode).toBe(200);

    const built = (await buildSubscribers(ctx.db, org.organization_id, ['alice'])).get('alice')!;
    expect(built.doc.credits).toEqual({
      'api-calls': [
        {
          id: first,
          amount: 7,
          priority: 1,
          effectiveAt: NOW + 1000,
          expiresAt: NOW + 9 * DAY,
          createdAt: expect.any(Number),
        },
        {
          id: scheduled,
          amount: 3,
          priority: 10,
          effectiveAt: NOW + DAY,
          expiresAt: NOW + 2 * DAY,
          createdAt: expect.any(Number),
        },
        {
          id: late,
          amount: 5,
          priority: 20,
          effectiveAt: NOW,
          expiresAt: null,
          createdAt: expect.any(Number),
        },
      ],
      tokens: [
        {
          id: tokens,
          amount: 11,
          priority: 10,
          effectiveAt: NOW + 1000,
          expiresAt: null,
          createdAt: expect.any(Number),
        },
      ],
    });
    // What the gateways read is that document at that version, published before each write answered.
    expect(await published()).toEqual({ v: built.version, doc: built.doc });
  });

  it('leaves credits out for a subscriber without any', async () => {
    const built = (await buildSubscribers(ctx.db, org.organization_id, ['alice'])).get('alice')!;
    expect(built.doc.credits).toBeUndefined();
  });

  it('read-your-writes: the POST and the DELETE answer after the new document is in Redis', async () => {
    const before = (await published().catch(() => ({ v: 0 }))).v;
    const id = await credit({ feature: 'api-calls', amount: 4 });
    const afterPost = await published();
    expect(afterPost.v).toBeGreaterThan(before);
    expect(afterPost.doc.credits?.['api-calls']?.map((c) => c.id)).toEqual([id]);
    const res = await ctx.app.inject({
      method: 'DELETE',
      url: `/org/subscribers/alice/credits/${id}`,
      headers: org.headers,
    });
    expect(res.statusCode).toBe(200);
    const afterVoid = await published();
    expect(afterVoid.v).toBe(afterPost.v + 1);
    expect(afterVoid.doc.credits).toBeUndefined();
  });
});
