import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { deleteKeys } from '../../../test-support/redis-keys.ts';
import {
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { buildGatewayApp, type GatewayApp } from '../../src/app.ts';
import { catalogClient, gatewayOverAdmin, gatewayWithCatalog, injector } from '../helpers.ts';

const START = Date.UTC(2031, 4, 10, 12, 0, 0, 0);
const clock = new ManualClock(START);
let ctx: AdminTestContext;
let gateway: GatewayApp;
let org: TestOrganization;
let api: ReturnType<typeof catalogClient>;

const counter = async (
  app: GatewayApp,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> => {
  const metric = await app.gatewayMetrics.registry.getSingleMetric(name)?.get();
  return (metric?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))
    .reduce((sum, v) => sum + v.value, 0);
};

const check = (subscriber: string, feature: string, headers = org.headers) =>
  gateway.inject({
    method: 'POST',
    url: `/org/subscribers/${subscriber}/entitlements/check`,
    headers,
    payload: { feature },
  });
const list = (subscriber: string, query = '') =>
  gateway.inject({
    method: 'GET',
    url: `/org/subscribers/${subscriber}/entitlements${query}`,
    headers: org.headers,
  });

beforeAll(async () => {
  ({ ctx, gateway, org, api } = await gatewayWithCatalog(clock));
});

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

/** A new organization whose subscriber is on a plan granting 3 seats, written through the gateway. */
async function organizationWithSubscriber(name: string, subscriberId: string) {
  const own = await createTestOrganization(ctx.db, name);
  const ownApi = catalogClient(injector(gateway), own.headers);
  await ownApi.feature('seats', 'limit');
  await ownApi.plan('small', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
  await ownApi.subscriber(subscriberId);
  await ownApi.subscribe(subscriberId, 'small');
  return { own, ownApi };
}

describe('POST check and GET entitlements', () => {
  it('answers from the plan with the eval headers', async () => {
    const res = await check('alice', 'seats');
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('{"feature":"seats","kind":"limit","limit":3,"source":"plan"}');
    expect(res.headers['x-svc-eval-limit']).toBe('1000');
    expect(Number(res.headers['x-svc-eval-used'])).toBeGreaterThan(0);
    expect(res.headers['x-svc-eval-warn']).toBeUndefined();
    expect(res.headers['x-request-id']).toMatch(/^req_/);
  });

  it('answers a feature nobody grants with source none', async () => {
    expect((await check('alice', 'sso')).json()).toEqual({
      feature: 'sso',
      kind: 'flag',
      allowed: false,
      source: 'none',
    });
  });

  it('lists granted features, or every feature with all=true, ordered by key', async () => {
    // A catalog of its own: other cases add features to the shared one.
    const own = await createTestOrganization(ctx.db, 'Listing org');
    const ownApi = catalogClient(injector(gateway), own.headers);
    for (const [key, kind] of [
      ['sso', 'flag'],
      ['seats', 'limit'],
      ['audit', 'flag'],
    ] as const)
      await ownApi.feature(key, kind);
    await ownApi.plan('basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
    await ownApi.subscriber('alice');
    await ownApi.subscribe('alice', 'basic');
    await ownApi.subscriber('bob');
    const ownList = (subscriber: string, query = '') =>
      gateway.inject({
        method: 'GET',
        url: `/org/subscribers/${subscriber}/entitlements${query}`,
        headers: own.headers,
      });
    expect((await ownList('alice')).json()).toEqual({
      subscriber_id: 'alice',
      entitlements: [{ feature: 'seats', kind: 'limit', limit: 3, source: 'plan' }],
    });
    const all = (await ownList('alice', '?all=true')).json();
    expect(all.entitlements.map((e: { feature: string }) => e.feature)).toEqual(['audit', 'seats', 'sso']);
    expect((await ownList('bob')).json()).toEqual({ subscriber_id: 'bob', entitlements: [] });
  });

  it('404s an unknown subscriber or feature and does not count them', async () => {
    const before = Number((await check('alice', 'seats')).headers['x-svc-eval-used']);
    const unknownSubscriber = await check('nobody', 'seats');
    expect(unknownSubscriber.statusCode).toBe(404);
    expect(unknownSubscriber.json().error).toMatchObject({
      code: 'NOT_FOUND',
      details: { field: 'subscriber_id' },
    });
    const unknownFeature = await check('alice', 'nope');
    expect(unknownFeature.statusCode).toBe(404);
    expect(unknownFeature.json().error).toMatchObject({ code: 'NOT_FOUND', details: { field: 'feature' } });
    expect((await list('nobody')).statusCode).toBe(404);
    await new Promise((resolve) => setTimeout(resolve, 50)); // refunds are sent after the response
    expect(Number((await check('alice', 'seats')).headers['x-svc-eval-used'])).toBe(before + 1);
  });

  it('has no HEAD eval: SPEC names GET and POST, and a probe must not spend the allotment', async () => {
    const before = Number((await check('alice', 'seats')).headers['x-svc-eval-used']);
    const head = await gateway.inject({
      method: 'HEAD',
      url: '/org/subscribers/alice/entitlements',
      headers: org.headers,
    });
    expect(head.statusCode).toBe(404);
    expect(Number((await check('alice', 'seats')).headers['x-svc-eval-used'])).toBe(before + 1);
  });

  it('refuses bad input and bad keys with the error body', async () => {
    const noKey = await gateway.inject({
      method: 'POST',
      url: '/org/subscribers/alice/entitlements/check',
      payload: { feature: 'x' },
    });
    expect(noKey.statusCode).toBe(401);
    expect(noKey.json().error.code).toBe('UNAUTHENTICATED');
    const badKey = await check('alice', 'seats', { 'x-api-key': 'svc-mk-1-nope' });
    expect(badKey.statusCode).toBe(401);
    const extra = await gateway.inject({
      method: 'POST',
      url: '/org/subscribers/alice/entitlements/check',
      headers: org.headers,
      payload: { feature: 'seats', extra: 1 },
    });
    expect(extra.statusCode).toBe(422);
    const malformed = await gateway.inject({
      method: 'POST',
      url: '/org/subscribers/alice/entitlements/check',
      headers: { ...org.headers, 'content-type': 'application/json' },
      payload: '{"feature":',
    });
    expect(malformed.statusCode).toBe(422);
    expect((await list('alice', '?all=maybe')).statusCode).toBe(422);
    expect((await list('alice', '?other=1')).statusCode).toBe(422);
  });

  it('403s a key without the check scope', async () => {
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:read']);
    const res = await check('alice', 'seats', { 'x-api-key': apiKey });
    expect(res.statusCode).toBe(403);
    expect(res.json().error.code).toBe('FORBIDDEN');
  });
});

describe('read-your-writes through the gateway', () => {
  it('sees a grant change, override put and delete, subscription create, change and cancel at once', async () => {
    // A plan of its own: this case changes its grants, which other cases' answers must not see.
    await api.plan('ryw-basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
    await api.subscriber('carol');
    const first = await api.subscribe('carol', 'ryw-basic');
    expect((await check('carol', 'seats')).json().limit).toBe(3);

    await api.grants('ryw-basic', [{ feature: 'seats', kind: 'limit', limit: 5 }]);
    expect((await check('carol', 'seats')).json().limit).toBe(5);

    await api.override('carol', 'seats', { kind: 'limit', limit: null });
    expect((await check('carol', 'seats')).json()).toEqual({
      feature: 'seats',
      kind: 'limit',
      limit: null,
      source: 'override',
    });

    await api.deleteOverride('carol', 'seats');
    expect((await check('carol', 'seats')).json()).toMatchObject({ limit: 5, source: 'plan' });

    const second = await api.change('carol', first, 'pro');
    expect((await check('carol', 'sso')).json()).toMatchObject({ allowed: true, source: 'plan' });
    expect((await check('carol', 'seats')).json().limit).toBe(25);

    await api.subscribe('carol', 'ryw-basic');
    await api.grants('ryw-basic', [{ feature: 'seats', kind: 'limit', limit: 50 }]);
    expect((await check('carol', 'seats')).json().limit).toBe(50);

    await api.cancel('carol', second);
    expect((await check('carol', 'sso')).json()).toMatchObject({ allowed: false, source: 'none' });
  });

  it('expires an override exactly at expires_at, without a write', async () => {
    await api.subscriber('dave');
    await api.subscribe('dave', 'pro');
    const expiresAt = clock.now() + 1000;
    await api.override('dave', 'sso', {
      kind: 'flag',
      allowed: false,
      expires_at: new Date(expiresAt).toISOString(),
    });
    expect((await check('dave', 'sso')).json()).toMatchObject({ allowed: false, source: 'override' });
    clock.set(expiresAt - 1);
    expect((await check('dave', 'sso')).json()).toMatchObject({ allowed: false, source: 'override' });
    clock.set(expiresAt);
    expect((await check('dave', 'sso')).json()).toMatchObject({ allowed: true, source: 'plan' });
  });

  it('refuses a revoked key on the very next request', async () => {
    const { apiKey, serviceAccountId, keyId } = await createKeyWithScopes(ctx.db, org.organization_id, [
      'check',
    ]);
    expect((await check('alice', 'seats', { 'x-api-key': apiKey })).statusCode).toBe(200);
    await api.send('DELETE', `/org/service-accounts/${serviceAccountId}/api-keys/${keyId}`, undefined, 204);
    const res = await check('alice', 'seats', { 'x-api-key': apiKey });
    expect(res.statusCode).toBe(401);
    expect((await check('alice', 'seats')).statusCode).toBe(200);
  });
});

describe('cached keys and announcements', () => {
  it("forgets an organization's cached keys, except those read at or after the announced auth version", async () => {
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    const key = { 'x-api-key': apiKey };
    expect((await check('alice', 'seats', key)).statusCode).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 200)); // announcements of the organization's first eval
    expect((await check('alice', 'seats', key)).statusCode).toBe(200);
    const misses = () =>
      counter(gateway, 'gateway_cache_requests_total', { cache: 'principal', result: 'miss' });
    const before = await misses();
    const version = Number(await ctx.redis.hget(gateway.redisKeys.auth(org.organization_id), 'v'));
    expect(version).toBeGreaterThan(0);
    gateway.principals.forgetOrganization(org.organization_id, version); // a late announcement: kept
    expect((await check('alice', 'seats', key)).statusCode).toBe(200);
    expect(await misses()).toBe(before);
    gateway.principals.forgetOrganization(org.organization_id, version + 1);
    expect((await check('alice', 'seats', key)).statusCode).toBe(200);
    expect(await misses()).toBe(before + 1);
    gateway.principals.forgetOrganization(org.organization_id);
    expect((await check('alice', 'seats', key)).statusCode).toBe(200);
    expect(await misses()).toBe(before + 2);
  });
});

describe('suspension and reactivation', () => {
  it("refuses a suspended member's key at once, and accepts it again at once after reactivation", async () => {
    const { apiKey, memberId } = await createKeyWithScopes(
      ctx.db,
      org.organization_id,
      ['check'],
      'developer',
    );
    const key = { 'x-api-key': apiKey };
    expect((await check('alice', 'seats', key)).statusCode).toBe(200);
    await api.send('PATCH', `/org/members/${memberId}`, { status: 'suspended' }, 200);
    expect((await check('alice', 'seats', key)).statusCode).toBe(401);
    expect((await check('alice', 'seats', key)).statusCode).toBe(401);
    await api.send('PATCH', `/org/members/${memberId}`, { status: 'active' }, 200);
    expect((await check('alice', 'seats', key)).statusCode).toBe(200);
  });
});

describe('client-supplied forwarding headers', () => {
  it('does not let a client choose the address admin records', async () => {
    const res = await gateway.inject({
      method: 'POST',
      url: '/org/features',
      headers: { ...org.headers, 'x-forwarded-for': '6.6.6.6' },
      payload: { key: 'spoof-check', name: 'Spoof check', kind: 'flag' },
    });
    expect(res.statusCode).toBe(201);
    const audit = await gateway.inject({
      method: 'GET',
      url: `/org/audit-events?request_id=${res.headers['x-request-id']}`,
      headers: org.headers,
    });
    expect(audit.json().audit_events[0].ip).not.toBe('6.6.6.6');
  });

  it('answers a text/plain eval body with 415', async () => {
    const res = await gateway.inject({
      method: 'POST',
      url: '/org/subscribers/alice/entitlements/check',
      headers: { ...org.headers, 'content-type': 'text/plain' },
      payload: '{"feature":"seats"}',
    });
    expect(res.statusCode).toBe(415);
    expect(res.json().error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
  });

  it('answers a malformed path or an over-long id with the error body', async () => {
    const bad = await gateway.inject({ method: 'GET', url: '/org/plans/%ff', headers: org.headers });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().error.code).toBe('VALIDATION_ERROR');
    // The router refuses it before any hook runs; the id to quote is still in the header, as on every answer.
    expect(bad.headers['x-request-id']).toBe(bad.json().error.request_id);
    const long = await gateway.inject({
      method: 'GET',
      url: `/org/subscribers/${'x'.repeat(2000)}`,
      headers: org.headers,
    });
    expect(long.statusCode).toBe(404);
    expect(long.json().error.code).toBe('NOT_FOUND');
    expect(long.headers['x-request-id']).toBe(long.json().error.request_id);
    const longEval = await check('y'.repeat(200), 'seats');
    expect(longEval.statusCode).toBe(404);
    // Longer than a subscriber id can be, yet within the router's bound: the same 404 as for any unknown id.
    const overLong = await check('y'.repeat(300), 'seats');
    expect(overLong.statusCode).toBe(404);
    expect(overLong.json().error.code).toBe('NOT_FOUND');
  });
});

describe('the warm path', () => {
  it('costs one Redis round trip, no snapshot rebuild and no Postgres query', async () => {
    await check('alice', 'seats');
    await list('alice');
    const trips = await counter(gateway, 'gateway_redis_round_trips_total');
    const rebuilds = await counter(gateway, 'gateway_snapshot_rebuild_requests_total');
    const queries = ctx.queriesRun();
    for (let i = 0; i < 20; i++) {
      expect((await check('alice', 'seats')).statusCode).toBe(200);
      expect((await list('alice')).statusCode).toBe(200);
    }
    expect(await counter(gateway, 'gateway_redis_round_trips_total')).toBe(trips + 40);
    expect(await counter(gateway, 'gateway_snapshot_rebuild_requests_total')).toBe(rebuilds);
    expect(ctx.queriesRun()).toBe(queries);
    // The count is live: a forwarded read does reach Postgres.
    await gateway.inject({ method: 'GET', url: '/org/subscribers/alice', headers: org.headers });
    expect(ctx.queriesRun()).toBeGreaterThan(queries);
  });

  it('keeps at most GATEWAY_CACHE_MB of subscribers in memory (bytes, not entries), least recently used going first', async () => {
    const small = await buildGatewayApp({
      config: { ...gateway.config, gatewayCacheBytes: 400 },
      clock,
      logger: false,
    });
    try {
      const smallCheck = (subscriber: string) =>
        small.inject({
          method: 'POST',
          url: `/org/subscribers/${subscriber}/entitlements/check`,
          headers: org.headers,
          payload: { feature: 'seats' },
        });
      const misses = () =>
        counter(small, 'gateway_cache_requests_total', { cache: 'entitlements', result: 'miss' });
      await smallCheck('alice');
      await smallCheck('alice');
      expect(await misses()).toBe(1);
      await smallCheck('bob');
      expect((await smallCheck('alice')).json()).toMatchObject({ feature: 'seats', source: 'plan' });
      expect(await misses()).toBe(3);
    } finally {
      await small.close();
    }
  });

  it('rebuilds correctly after Redis is flushed', async () => {
    // An organization of its own, whose answers no other case changes.
    const own = await createTestOrganization(ctx.db, 'Flushed org');
    const ownApi = catalogClient(injector(gateway), own.headers);
    await ownApi.feature('sso', 'flag');
    await ownApi.feature('seats', 'limit');
    await ownApi.plan('big', [
      { feature: 'sso', kind: 'flag' },
      { feature: 'seats', kind: 'limit', limit: 50 },
    ]);
    for (const id of ['carol', 'dave']) {
      await ownApi.subscriber(id);
      await ownApi.subscribe(id, 'big');
    }
    await ownApi.override('dave', 'seats', { kind: 'limit', limit: 7 });
    const ownCheck = (subscriber: string, feature: string) => check(subscriber, feature, own.headers);
    expect((await ownCheck('carol', 'seats')).json()).toMatchObject({ limit: 50, source: 'plan' });
    await deleteKeys(ctx.redis, `${ctx.config.redisKeyPrefix}:*`);
    expect((await ownCheck('carol', 'seats')).json()).toMatchObject({ limit: 50, source: 'plan' });
    expect((await ownCheck('dave', 'seats')).json()).toMatchObject({ limit: 7, source: 'override' });
    expect((await ownCheck('dave', 'sso')).json()).toMatchObject({ allowed: true, source: 'plan' });
    expect(await ctx.redis.hget(ctx.app.redisKeys.catalog(own.organization_id), 'v')).not.toBeNull();
  });

  it('answers right when the subscriber-version index is lost (or predates the gateway), and heals it', async () => {
    // A Redis written before the index existed holds the documents without it: the gate sees version 0.
    const { own, ownApi } = await organizationWithSubscriber('Unindexed org', 'erin');
    const ownCheck = (feature: string) => check('erin', feature, own.headers);
    expect((await ownCheck('seats')).json()).toMatchObject({ limit: 3, source: 'plan' });
    const index = ctx.app.redisKeys.subscriberVersions(own.organization_id);
    const indexed = await ctx.redis.hget(index, 'erin');
    expect(Number(indexed)).toBeGreaterThan(0);
    await ctx.redis.del(index);

    expect((await ownCheck('seats')).json()).toMatchObject({ limit: 3, source: 'plan' });
    expect(await ctx.redis.hget(index, 'erin')).toBe(indexed);
    // Still read-your-writes once healed: a change is seen by the very next eval.
    await ownApi.override('erin', 'seats', { kind: 'limit', limit: 9 });
    expect((await ownCheck('seats')).json()).toMatchObject({ limit: 9, source: 'override' });
  });
});

describe('the subscriber-write stamp', () => {
  // Deaf to invalidation announcements (a best-effort hint): what it answers rests on the gate call alone.
  let deaf: GatewayApp;
  beforeAll(async () => {
    deaf = await gatewayOverAdmin(ctx, { clock, subscribeInvalidations: false });
  });
  afterAll(async () => {
    await deaf?.close();
  });

  it("trusts an entry verified at the organization's current stamp, and reads its version again once any subscriber is written", async () => {
    const { own, ownApi } = await organizationWithSubscriber('Stamped org', 'fay');
    const seats = async () =>
      (
        await deaf.inject({
          method: 'POST',
          url: '/org/subscribers/fay/entitlements/check',
          headers: own.headers,
          payload: { feature: 'seats' },
        })
      ).json();
    const misses = () =>
      counter(deaf, 'gateway_cache_requests_total', { cache: 'entitlements', result: 'miss' });
    expect(await seats()).toMatchObject({ limit: 3 });
    expect(await seats()).toMatchObject({ limit: 3 });

    // Behind the stamp's back (no admin write does this): a trusted entry's version is not read, so no reload.
    const index = ctx.app.redisKeys.subscriberVersions(own.organization_id);
    const version = await ctx.redis.hget(index, 'fay');
    await ctx.redis.hset(index, 'fay', String(Number(version) + 100));
    const before = await misses();
    expect(await seats()).toMatchObject({ limit: 3 });
    expect(await misses()).toBe(before);
    await ctx.redis.hset(index, 'fay', version!);

    // A write to another subscriber moves the stamp: fay's version is read (unchanged: still a hit) ...
    await ownApi.subscriber('gil');
    expect(await seats()).toMatchObject({ limit: 3 });
    expect(await seats()).toMatchObject({ limit: 3 });
    expect(await misses()).toBe(before);
    // ... and every write to fay herself is seen by the very next eval, trusted entry or not.
    await ownApi.override('fay', 'seats', { kind: 'limit', limit: 8 });
    expect(await seats()).toMatchObject({ limit: 8, source: 'override' });
    expect(await seats()).toMatchObject({ limit: 8, source: 'override' });
    await ownApi.deleteOverride('fay', 'seats');
    expect(await seats()).toMatchObject({ limit: 3, source: 'plan' });
  });
});
