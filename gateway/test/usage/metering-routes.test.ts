import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { publishArrangement, saveArrangement, type Arrangement } from '@ent/common/metering/arrangement';
import { createAdminContext, createTestOrganization, type AdminTestContext, type TestOrganization } from '../../../test-support/admin-context.ts';
import { buildGatewayApp, type GatewayApp } from '../../src/app.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { catalogClient, injector, gatewayOverAdmin } from '../helpers.ts';

const START = Date.UTC(2031, 4, 10, 12, 0, 0, 0);
const DAY = 24 * 60 * 60 * 1000;
const clock = new ManualClock(START);
let ctx: AdminTestContext;
let gateway: GatewayApp;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  gateway = await gatewayOverAdmin(ctx, { clock });
});

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

/** A fresh organization with one subscriber on a plan granting `seats`, under the given arrangement. */
async function organizationWith(arrangement: Arrangement): Promise<TestOrganization> {
  const org = await createTestOrganization(ctx.db, `Metered ${Math.random()}`);
  await saveArrangement(ctx.db, org.organization_id, arrangement);
  await publishArrangement(ctx.redis, ctx.app.redisKeys, org.organization_id, arrangement);
  const api = catalogClient(injector(gateway), org.headers);
  await api.feature('seats', 'limit');
  await api.plan('basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
  await api.subscriber('alice');
  await api.subscribe('alice', 'basic');
  return org;
}

const check = (org: TestOrganization, feature = 'seats') =>
  gateway.inject({ method: 'POST', url: '/org/subscribers/alice/entitlements/check', headers: org.headers, payload: { feature } });
const list = (org: TestOrganization) =>
  gateway.inject({ method: 'GET', url: '/org/subscribers/alice/entitlements', headers: org.headers });
const usage = async (org: TestOrganization) =>
  (await gateway.inject({ method: 'GET', url: '/org/usage/current', headers: org.headers })).json();
const headersOf = (res: Awaited<ReturnType<typeof check>>) => ({
  limit: res.headers['x-svc-eval-limit'],
  used: res.headers['x-svc-eval-used'],
  warn: res.headers['x-svc-eval-warn'],
});

describe('eval headers and the monthly allotment through the eval routes', () => {
  it('walks 80%, 100%, grace, 409 on both routes after 7 days, and the reset on the first of the month', async () => {
    clock.set(START);
    const org = await organizationWith({ plan: 'free', evalLimit: 10, blocking: true, burstPerSecond: 10_000 });
    const seen = [];
    for (let i = 1; i <= 11; i++) {
      const res = i % 2 ? await check(org) : await list(org);
      expect(res.statusCode).toBe(200);
      seen.push(headersOf(res));
    }
    expect(seen[6]).toEqual({ limit: '10', used: '7', warn: undefined });
    expect(seen[7]).toEqual({ limit: '10', used: '8', warn: '80' });
    expect(seen[9]).toEqual({ limit: '10', used: '10', warn: '100' });
    expect(seen[10]).toEqual({ limit: '10', used: '11', warn: 'grace' });
    expect(await usage(org)).toMatchObject({ count: 11, warn: '100', allowed: true, blocking: true });

    clock.advance(7 * DAY);
    for (const res of [await check(org), await list(org)]) {
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toMatchObject({ code: 'CONFLICT', details: { field: 'evals', value: '2031-05' } });
      expect(res.headers['x-svc-eval-warn']).toBe('grace');
    }
    expect(await usage(org)).toMatchObject({ count: 11, warn: 'grace', allowed: false });
    // The rest of the API keeps working.
    expect((await gateway.inject({ method: 'GET', url: '/org/plans', headers: org.headers })).statusCode).toBe(200);

    clock.set(Date.UTC(2031, 5, 1, 0, 0, 0, 0));
    const next = await check(org);
    expect(next.statusCode).toBe(200);
    expect(headersOf(next)).toEqual({ limit: '10', used: '1', warn: undefined });
    expect(await usage(org)).toMatchObject({ period: '2031-06', count: 1, warn: null, allowed: true });
  });

  it('keeps answering past the limit when non-blocking', async () => {
    clock.set(START);
    const org = await organizationWith({ plan: 'enterprise', evalLimit: 2, blocking: false, burstPerSecond: 10_000 });
    await check(org);
    await check(org);
    clock.advance(8 * DAY); // past the grace period, same month
    const res = await check(org);
    expect(res.statusCode).toBe(200);
    expect(headersOf(res)).toEqual({ limit: '2', used: '3', warn: '100' });
  });

  it('counts a 304 out of its own headers: it is refunded, so X-Svc-Eval-Used (and its warning) leave it out', async () => {
    clock.set(START);
    const org = await organizationWith({ plan: 'free', evalLimit: 5, blocking: true, burstPerSecond: 10_000 });
    for (let i = 0; i < 3; i++) expect((await check(org)).statusCode).toBe(200);
    const first = await list(org);
    expect(headersOf(first)).toEqual({ limit: '5', used: '4', warn: '80' });
    const revalidate = () =>
      gateway.inject({
        method: 'GET',
        url: '/org/subscribers/alice/entitlements',
        headers: { ...org.headers, 'if-none-match': first.headers.etag as string },
      });
    const revalidated = await revalidate();
    expect(revalidated.statusCode).toBe(304);
    expect(headersOf(revalidated)).toEqual({ limit: '5', used: '4', warn: '80' });
    // At the limit, the 304's headers are those of the count before it: 5 of 5 stays 100, never grace.
    expect(headersOf(await check(org))).toEqual({ limit: '5', used: '5', warn: '100' });
    const atLimit = await revalidate();
    expect(atLimit.statusCode).toBe(304);
    expect(headersOf(atLimit)).toEqual({ limit: '5', used: '5', warn: '100' });
    await expect.poll(async () => (await usage(org)).count).toBe(5);
  });

  it('sends no eval headers for an unlimited organization', async () => {
    clock.set(START);
    const org = await organizationWith({ plan: null, evalLimit: null, blocking: false, burstPerSecond: 10_000 });
    const res = await check(org);
    expect(res.statusCode).toBe(200);
    expect(headersOf(res)).toEqual({ limit: undefined, used: undefined, warn: undefined });
    expect(await usage(org)).toMatchObject({ gated: false, reason: 'unlimited', count: 1 });
  });
});

describe('burst', () => {
  it('answers 429 RATE_LIMITED with Retry-After past the burst, and counts only the 2xx answers', async () => {
    clock.set(START + 500);
    const org = await organizationWith({ plan: 'free', evalLimit: 1000, blocking: true, burstPerSecond: 5 });
    const answers = await Promise.all(Array.from({ length: 8 }, () => check(org)));
    const statuses = answers.map((res) => res.statusCode).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    const refused = answers.find((res) => res.statusCode === 429)!;
    expect(refused.json().error).toMatchObject({ code: 'RATE_LIMITED', type: 'rate_limit_error' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // 404s are not counted either.
    clock.advance(1000);
    expect((await check(org, 'no-such-feature')).statusCode).toBe(404);
    expect((await usage(org)).count).toBe(5);
  });
});

describe('GET /org/usage/current on the gateway', () => {
  it('answers from Redis while admin is unreachable, with the record admin gives', async () => {
    const org = await organizationWith({ plan: 'free', evalLimit: 10, blocking: true, burstPerSecond: 1000 });
    expect((await check(org)).statusCode).toBe(200);
    const fromAdmin = (await ctx.app.inject({ method: 'GET', url: '/org/usage/current', headers: org.headers })).json();
    const lonely = await buildGatewayApp({ config: { ...ctx.config, adminUrl: 'http://127.0.0.1:9' }, clock, logger: false });
    try {
      const res = await lonely.inject({ method: 'GET', url: '/org/usage/current', headers: org.headers });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual(fromAdmin);
      expect(res.json()).toMatchObject({ count: 1, limit: 10, plan: 'free' });
    } finally {
      await lonely.close();
    }
  });

  it('needs subscribers:read (403), refuses a revoked key on the next request (401) and any query (422)', async () => {
    const org = await organizationWith({ plan: 'free', evalLimit: 10, blocking: true, burstPerSecond: 1000 });
    const checkOnly = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    const forbidden = await gateway.inject({ method: 'GET', url: '/org/usage/current', headers: { 'x-api-key': checkOnly.apiKey } });
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.json().error.code).toBe('FORBIDDEN');
    const query = await gateway.inject({ method: 'GET', url: '/org/usage/current?x=1', headers: org.headers });
    expect(query.statusCode).toBe(422);

    const reader = await createKeyWithScopes(ctx.db, org.organization_id, ['subscribers:read']);
    const headers = { 'x-api-key': reader.apiKey };
    expect((await gateway.inject({ method: 'GET', url: '/org/usage/current', headers })).statusCode).toBe(200);
    const revoked = await gateway.inject({
      method: 'DELETE',
      url: `/org/service-accounts/${reader.serviceAccountId}/api-keys/${reader.keyId}`,
      headers: org.headers,
    });
    expect(revoked.statusCode).toBe(204);
    expect((await gateway.inject({ method: 'GET', url: '/org/usage/current', headers })).statusCode).toBe(401);
  });
});
