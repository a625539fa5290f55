import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { seedCatalog } from './tenant-data.ts';

/**
 * Organization B holds a full-access key and knows every id of organization A (subscriber ids, feature and
 * plan keys, subscription ids). Whatever it puts in paths, bodies or queries, it never reads or changes A's
 * data: A's records look like they do not exist (404), and lists show only B's own.
 */
let ctx: AdminTestContext;
let a: TestOrganization;
let aSubscriptionId: string;
let aOverride: Record<string, unknown>;

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
const as = (who: TestOrganization, method: Method, url: string, payload?: object) =>
  ctx.app.inject({ method, url, headers: who.headers, ...(payload === undefined ? {} : { payload }) });

/** Everything of A that B might reach, read with A's own key. */
const snapshotOfA = async () => {
  const read = async (url: string) => {
    const res = await as(a, 'GET', url);
    expect(res.statusCode, url).toBe(200);
    return res.json();
  };
  const version = await ctx.db
    .selectFrom('subscribers')
    .select('version')
    .where('organization_id', '=', a.organization_id)
    .where('subscriber_id', '=', 'alice')
    .executeTakeFirstOrThrow();
  return {
    version: version.version,
    subscriber: await read('/org/subscribers/alice'),
    subscribers: await read('/org/subscribers'),
    subscriptions: await read('/org/subscribers/alice/subscriptions'),
    overrides: await read('/org/subscribers/alice/overrides?include_expired=true'),
    features: await read('/org/features'),
    plan: await read('/org/plans/basic'),
  };
};

beforeAll(async () => {
  ctx = await createAdminContext();
  a = await createTestOrganization(ctx.db, 'Org A');
  const setup = async (method: Method, url: string, payload: object) => {
    const res = await as(a, method, url, payload);
    expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
    return res.json();
  };
  await seedCatalog(ctx.db, a.organization_id, setup);
  await setup('POST', '/org/subscribers', { subscriber_id: 'alice', name: 'Alice of A' });
  aSubscriptionId = (await setup('POST', '/org/subscribers/alice/subscriptions', { plan_id: 'basic' }))
    .subscription_id;
  aOverride = await setup('PUT', '/org/subscribers/alice/overrides/seats', { kind: 'limit', limit: 50 });
});
afterAll(() => ctx.close());

/** What B tries on A's records, by A's ids: every one must be 404 (SUB is A's subscription id). */
const ATTEMPTS: [Method, string, object?][] = [
  ['GET', '/org/subscribers/alice'],
  ['PATCH', '/org/subscribers/alice', { name: 'Taken over' }],
  ['GET', '/org/subscribers/alice/subscriptions'],
  ['POST', '/org/subscribers/alice/subscriptions', { plan_id: 'pro' }],
  ['POST', '/org/subscribers/alice/subscriptions/change', { plan_id: 'pro' }],
  ['POST', '/org/subscribers/alice/subscriptions/change', { plan_id: 'pro', subscription_id: 'SUB' }],
  ['POST', '/org/subscribers/alice/subscriptions/SUB/cancel'],
  ['GET', '/org/subscribers/alice/overrides'],
  ['GET', '/org/subscribers/alice/overrides/seats'],
  ['PUT', '/org/subscribers/alice/overrides/seats', { kind: 'limit', limit: 0 }],
  ['PUT', '/org/subscribers/alice/overrides/sso', { kind: 'flag', allowed: true }],
  ['DELETE', '/org/subscribers/alice/overrides/seats'],
  ['GET', '/org/features/sso'],
  ['PATCH', '/org/features/sso', { name: 'Hijacked' }],
  ['GET', '/org/plans/basic'],
  ['PATCH', '/org/plans/basic', { name: 'Hijacked' }],
];

const attempt = (who: TestOrganization, [method, url, payload]: [Method, string, object?]) => {
  const withIds = (text: string) => text.replace('SUB', aSubscriptionId);
  const body = payload && JSON.parse(withIds(JSON.stringify(payload)));
  return as(who, method, withIds(url), body);
};

/** A new organization B that made records under A's subscriber id and feature key. */
async function organizationWithRecords(): Promise<TestOrganization> {
  const b = await createTestOrganization(ctx.db, 'Org B');
  expect(
    (await as(b, 'POST', '/org/subscribers', { subscriber_id: 'alice', name: 'Alice of B' })).statusCode,
  ).toBe(201);
  expect(
    (await as(b, 'POST', '/org/features', { key: 'seats', name: 'B seats', kind: 'limit' })).statusCode,
  ).toBe(201);
  const put = await as(b, 'PUT', '/org/subscribers/alice/overrides/seats', { kind: 'limit', limit: 1 });
  expect(put.statusCode).toBe(200);
  expect(put.json().id).not.toBe(aOverride.id);
  expect((await as(b, 'PATCH', '/org/subscribers/alice', { name: 'Renamed by B' })).statusCode).toBe(200);
  return b;
}

describe('before B has records of its own', () => {
  it.each(ATTEMPTS)('B gets 404 on %s %s', async (method, url, payload) => {
    const b = await createTestOrganization(ctx.db, 'Org B');
    const res = await attempt(b, [method, url, payload]);
    expect(res.statusCode, res.body).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });

  it("B's lists show none of A's records, whatever cursor it sends", async () => {
    const b = await createTestOrganization(ctx.db, 'Org B');
    // A cursor that is not one of B's records is refused (422 on starting_after), never a page of A's.
    for (const url of ['/org/subscribers?starting_after=0', '/org/subscribers?starting_after=alice']) {
      const res = await as(b, 'GET', url);
      expect(res.statusCode, url).toBe(422);
      expect(res.json().error.details, url).toMatchObject({ field: 'starting_after' });
    }
    for (const url of ['/org/subscribers', '/org/features', '/org/plans']) {
      const res = await as(b, 'GET', url);
      expect(res.statusCode, url).toBe(200);
      const body = res.json();
      const list = body.subscribers ?? body.features ?? body.plans;
      expect(list, url).toEqual([]);
    }
  });

  it('leaves every record of A as it was after all of them', async () => {
    const before = await snapshotOfA();
    const b = await createTestOrganization(ctx.db, 'Org B');
    for (const each of ATTEMPTS) expect((await attempt(b, each)).statusCode).toBe(404);
    expect(await snapshotOfA()).toEqual(before);
  });
});

describe('after B made records under the same ids and keys', () => {
  it('B can use the same subscriber id and feature keys without touching A', async () => {
    const before = await snapshotOfA();
    await organizationWithRecords();
    expect(await snapshotOfA()).toEqual(before);
  });

  it("B still cannot reach A's subscription, plans or features through its own subscriber", async () => {
    const b = await organizationWithRecords();
    const before = await snapshotOfA();
    expect(
      (await as(b, 'POST', `/org/subscribers/alice/subscriptions/${aSubscriptionId}/cancel`)).statusCode,
    ).toBe(404);
    expect(
      (
        await as(b, 'POST', '/org/subscribers/alice/subscriptions/change', {
          plan_id: 'pro',
          subscription_id: aSubscriptionId,
        })
      ).statusCode,
    ).toBe(404);
    // A's plan keys are unknown plans to B.
    const subscribe = await as(b, 'POST', '/org/subscribers/alice/subscriptions', { plan_id: 'basic' });
    expect(subscribe.statusCode).toBe(422);
    expect(subscribe.json().error.details).toMatchObject({ field: 'plan_id' });
    // sso exists only in A's catalog.
    expect(
      (await as(b, 'PUT', '/org/subscribers/alice/overrides/sso', { kind: 'flag', allowed: true }))
        .statusCode,
    ).toBe(404);
    expect((await as(b, 'DELETE', '/org/subscribers/alice/overrides/sso')).statusCode).toBe(404);
    expect(await snapshotOfA()).toEqual(before);
  });

  it("B's lists show only B's records", async () => {
    const b = await organizationWithRecords();
    expect((await as(b, 'GET', '/org/subscribers')).json().subscribers).toMatchObject([
      { subscriber_id: 'alice', name: 'Renamed by B' },
    ]);
    expect((await as(b, 'GET', '/org/subscribers/alice/subscriptions')).json().subscriptions).toEqual([]);
    const foreignCursor = await as(
      b,
      'GET',
      `/org/subscribers/alice/subscriptions?starting_after=${aSubscriptionId}`,
    );
    expect(foreignCursor.statusCode).toBe(422);
    expect(foreignCursor.json().error.details).toMatchObject({ field: 'starting_after' });
    const overrides = (await as(b, 'GET', '/org/subscribers/alice/overrides?include_expired=true')).json()
      .overrides;
    expect(overrides).toMatchObject([{ feature: 'seats', limit: 1 }]);
    expect((await as(b, 'GET', '/org/features')).json().features.map((f: { key: string }) => f.key)).toEqual([
      'seats',
    ]);
  });

  it("B deleting its override leaves A's override of the same feature key", async () => {
    const b = await organizationWithRecords();
    expect((await as(b, 'DELETE', '/org/subscribers/alice/overrides/seats')).statusCode).toBe(204);
    expect((await as(a, 'GET', '/org/subscribers/alice/overrides/seats')).json()).toEqual(aOverride);
  });
});
