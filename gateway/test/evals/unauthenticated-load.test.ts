import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify from 'fastify';
import { generateApiKey } from '@ent/common/auth/api-key';
import { clientKey } from '@ent/common/auth/failure-limiter';
import { SESSION_COOKIE, generateSessionToken } from '@ent/common/auth/session-token';
import { GATEWAY_FAILURE_LIMIT_HEADER } from '@ent/common/http/local-client';
import { ManualClock } from '@ent/common/clock';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { gatewayOverAdmin } from '../helpers.ts';
import type { GatewayApp } from '../../src/app.ts';
import { adminClient } from '../../src/plugins/admin-client.ts';
import { infrastructure } from '../../src/plugins/infrastructure.ts';
import { metrics } from '@ent/common/http/metrics';
import { gatewayMetrics } from '../../src/plugins/gateway-metrics.ts';
import { principals } from '../../src/plugins/principals.ts';

/**
 * A flood of random well-formed keys (the most a key-less client can send that passes the offline checksum)
 * costs lookups bounded by the per-address failure limit, not by the number of requests.
 */
const LIMIT = 10;
const FLOOD = 500;
const clock = new ManualClock(Date.UTC(2031, 4, 10, 12, 0, 0, 0));
let ctx: AdminTestContext;
let gateway: GatewayApp;
let org: TestOrganization;

const randomKey = () => generateApiKey().plaintext;
/** A counter's total over the series whose `label` is `value`. */
const counterTotal = async (app: GatewayApp, name: string, label: string, value: string): Promise<number> => {
  const metric = await app.gatewayMetrics.registry.getSingleMetric(name)?.get();
  return (metric?.values ?? []).filter((v) => v.labels[label] === value).reduce((sum, v) => sum + v.value, 0);
};
const adminKeyLookups = (app: GatewayApp) =>
  counterTotal(app, 'gateway_snapshot_rebuild_requests_total', 'kind', 'api_key');
/** A remote client (a documentation address): this machine's own processes are not limited. */
const CLIENT = '203.0.113.10';
const check = (key: string, remoteAddress = CLIENT) =>
  gateway.inject({
    method: 'POST',
    url: '/org/subscribers/alice/entitlements/check',
    headers: { 'x-api-key': key },
    payload: { feature: 'sso' },
    remoteAddress,
  });

async function statuses<T extends { statusCode: number }>(
  count: number,
  send: (i: number) => Promise<T>,
): Promise<Record<number, number>> {
  const seen: Record<number, number> = {};
  for (let i = 0; i < count; i++) {
    const { statusCode } = await send(i);
    seen[statusCode] = (seen[statusCode] ?? 0) + 1;
  }
  return seen;
}

beforeAll(async () => {
  ctx = await createAdminContext({ clock, config: { authFailuresPerMinute: LIMIT } });
  gateway = await gatewayOverAdmin(ctx, { clock });
  org = await createTestOrganization(ctx.db, 'Flood org');
  await saveArrangement(ctx.db, org.organization_id, {
    plan: 'free',
    evalLimit: 100_000,
    blocking: true,
    burstPerSecond: 100_000,
  });
  const feature = await gateway.inject({
    method: 'POST',
    url: '/org/features',
    headers: org.headers,
    payload: { key: 'sso', name: 'SSO', kind: 'flag' },
  });
  expect(feature.statusCode).toBe(201);
  const subscriber = await gateway.inject({
    method: 'POST',
    url: '/org/subscribers',
    headers: org.headers,
    payload: { subscriber_id: 'alice' },
  });
  expect(subscriber.statusCode).toBe(201);
});

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

describe('random well-formed keys on the eval routes', () => {
  it('cost at most the limit in admin calls and Postgres queries, then 429 with Retry-After', async () => {
    expect((await check(org.api_key)).statusCode).toBe(200); // the real key is in memory before the flood
    // What one unknown key's lookup costs, measured from another address.
    const lookupsBefore = await adminKeyLookups(gateway);
    const queriesBefore = ctx.queriesRun();
    expect((await check(randomKey(), '10.9.9.9')).statusCode).toBe(401);
    const queriesPerLookup = ctx.queriesRun() - queriesBefore;
    expect(await adminKeyLookups(gateway)).toBe(lookupsBefore + 1);
    expect(queriesPerLookup).toBeGreaterThan(0);

    const lookups = await adminKeyLookups(gateway);
    const queries = ctx.queriesRun();
    const seen = await statuses(FLOOD, () => check(randomKey()));
    expect(seen).toEqual({ 401: LIMIT, 429: FLOOD - LIMIT });
    expect((await adminKeyLookups(gateway)) - lookups).toBe(LIMIT);
    expect(ctx.queriesRun() - queries).toBe(LIMIT * queriesPerLookup);

    const limited = await check(randomKey());
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error).toMatchObject({ code: 'RATE_LIMITED', type: 'rate_limit_error' });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    // A key in memory still answers from the limited address; other addresses are not limited.
    expect((await check(org.api_key)).statusCode).toBe(200);
    expect((await check(randomKey(), '10.1.2.3')).statusCode).toBe(401);
    // The bucket refills at LIMIT a minute.
    clock.advance(60_000);
    expect(await statuses(LIMIT + 5, () => check(randomKey()))).toEqual({ 401: LIMIT, 429: 5 });
  });

  it('holds the token before the lookup: concurrent requests cannot all pass on one', async () => {
    const lookups = await adminKeyLookups(gateway);
    const answers = await Promise.all(Array.from({ length: 200 }, () => check(randomKey(), '10.77.0.1')));
    const seen: Record<number, number> = {};
    for (const { statusCode } of answers) seen[statusCode] = (seen[statusCode] ?? 0) + 1;
    expect(seen).toEqual({ 401: LIMIT, 429: 200 - LIMIT });
    expect((await adminKeyLookups(gateway)) - lookups).toBe(LIMIT);
    const queries = ctx.queriesRun();
    const direct = await Promise.all(
      Array.from({ length: 200 }, () =>
        ctx.app.inject({
          method: 'GET',
          url: '/org/features',
          headers: { 'x-api-key': randomKey() },
          remoteAddress: '10.77.0.2',
        }),
      ),
    );
    expect(direct.filter((res) => res.statusCode === 401)).toHaveLength(LIMIT);
    expect(ctx.queriesRun() - queries).toBe(LIMIT);
  });

  it('answers a repeated unknown key from memory: one lookup, never a 429', async () => {
    const key = randomKey();
    const lookups = await adminKeyLookups(gateway);
    expect(await statuses(100, () => check(key, '10.4.4.4'))).toEqual({ 401: 100 });
    expect((await adminKeyLookups(gateway)) - lookups).toBe(1);
  });

  it('limits IPv6 clients by /64', async () => {
    expect(clientKey('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(clientKey('2001:0db8:0001:0002:ffff:0:0:9')).toBe('2001:db8:1:2::/64');
    expect(clientKey('::ffff:10.0.0.1')).toBe('10.0.0.1');
    const seen = await statuses(LIMIT + 3, (i) => check(randomKey(), `2001:db8:1:2::${i + 1}`));
    expect(seen).toEqual({ 401: LIMIT, 429: 3 });
    expect((await check(randomKey(), '2001:db8:1:3::1')).statusCode).toBe(401);
  });
});

describe('random well-formed keys sent straight to admin', () => {
  it('cost at most the limit in Postgres queries; a key that just worked still does', async () => {
    const headers = (key: string) => ({ 'x-api-key': key });
    const features = (key: string, remoteAddress: string) =>
      ctx.app.inject({ method: 'GET', url: '/org/features', headers: headers(key), remoteAddress });
    expect((await features(org.api_key, '192.0.2.1')).statusCode).toBe(200);
    const queries = ctx.queriesRun();
    const seen = await statuses(FLOOD, () => features(randomKey(), '192.0.2.1'));
    expect(seen).toEqual({ 401: LIMIT, 429: FLOOD - LIMIT });
    // One query per lookup: the key's row.
    expect(ctx.queriesRun() - queries).toBe(LIMIT);
    const limited = await features(randomKey(), '192.0.2.1');
    expect(limited.json().error.code).toBe('RATE_LIMITED');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await features(org.api_key, '192.0.2.1')).statusCode).toBe(200);
    // A real key this address never used waits like any other unknown key (the address is out of lookups).
    const fresh = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:read']);
    expect((await features(fresh.apiKey, '192.0.2.1')).statusCode).toBe(429);
    expect((await features(fresh.apiKey, '192.0.2.2')).statusCode).toBe(200);
  });

  it('remembers a never-issued key: repeats cost no query', async () => {
    const key = randomKey();
    const first = await ctx.app.inject({
      method: 'GET',
      url: '/org/features',
      headers: { 'x-api-key': key },
      remoteAddress: '192.0.2.50',
    });
    expect(first.statusCode).toBe(401);
    const queries = ctx.queriesRun();
    const seen = await statuses(100, () =>
      ctx.app.inject({
        method: 'GET',
        url: '/org/features',
        headers: { 'x-api-key': key },
        remoteAddress: '192.0.2.50',
      }),
    );
    expect(seen).toEqual({ 401: 100 });
    expect(ctx.queriesRun() - queries).toBe(0);
  });

  it("never limits this machine's own clients (loopback), unless told to", async () => {
    const seen = await statuses(LIMIT + 20, () => check(randomKey(), '127.0.0.1'));
    expect(seen).toEqual({ 401: LIMIT + 20 });
    expect((await check(randomKey(), '::1')).statusCode).toBe(401);
    const strict = await gatewayOverAdmin(ctx, { clock, config: { authFailuresLimitLoopback: true } });
    try {
      const strictCheck = (key: string) =>
        strict.inject({
          method: 'POST',
          url: '/org/subscribers/alice/entitlements/check',
          headers: { 'x-api-key': key },
          payload: { feature: 'sso' },
          remoteAddress: '127.0.0.1',
        });
      expect(await statuses(LIMIT + 5, () => strictCheck(randomKey()))).toEqual({ 401: LIMIT, 429: 5 });
    } finally {
      await strict.close();
    }
  });

  it('limits by the client address the gateway forwards, not by the gateway', async () => {
    const features = (key: string, remoteAddress: string) =>
      gateway.inject({ method: 'GET', url: '/org/features', headers: { 'x-api-key': key }, remoteAddress });
    const queries = ctx.queriesRun();
    const seen = await statuses(100, () => features(randomKey(), '198.51.100.7'));
    expect(seen).toEqual({ 401: LIMIT, 429: 100 - LIMIT });
    expect(ctx.queriesRun() - queries).toBe(LIMIT);
    expect((await features(randomKey(), '198.51.100.8')).statusCode).toBe(401);
    expect((await features(org.api_key, '198.51.100.9')).statusCode).toBe(200);
  });
});

describe('the negative cache', () => {
  it('never evicts real keys: unknown keys have their own bounded LRU', async () => {
    const { port } = ctx.app.server.address() as AddressInfo;
    const config = { ...ctx.config, adminUrl: `http://127.0.0.1:${port}`, authFailuresPerMinute: 0 };
    const app = Fastify({ logger: false });
    await app.register(infrastructure, { config, clock, redis: ctx.redis });
    await app.register(metrics, { requestDurationBuckets: [1], publicPortMetrics: 'off' });
    await app.register(gatewayMetrics);
    await app.register(adminClient);
    await app.register(principals, { max: 2, unknownMax: 2 });
    await app.ready();
    try {
      const real = await app.principals.authenticate(org.api_key, '127.0.0.1');
      expect(real.principal?.organizationId).toBe(org.organization_id);
      for (let i = 0; i < 50; i++) {
        await expect(app.principals.authenticate(randomKey(), '127.0.0.1')).rejects.toMatchObject({
          status: 401,
        });
      }
      const lookups = await adminKeyLookups(app);
      const redisReads = () => counterTotal(app, 'gateway_redis_round_trips_total', 'op', 'api_key');
      const reads = await redisReads();
      expect((await app.principals.authenticate(org.api_key, '127.0.0.1')).principal?.keyId).toBe(
        real.principal?.keyId,
      );
      expect(await adminKeyLookups(app)).toBe(lookups);
      expect(await redisReads()).toBe(reads);
    } finally {
      await app.close();
    }
  });
});

/**
 * A proxy on this machine that GATEWAY_TRUSTED_PROXIES does not name relays remote clients: the gateway sees a
 * loopback peer and an X-Forwarded-For it does not believe, and charges all of them to one limited bucket. Admin,
 * behind the gateway, must charge what the gateway decided, never exempt them as this machine's own processes. Each
 * case uses its own proxy address (127.0.0.x), so its own buckets.
 */
describe('clients of a proxy on this machine that nobody trusted', () => {
  const REMOTE = '203.0.113.5';
  const viaProxy = (proxy: string, headers: Record<string, string>) => ({
    remoteAddress: proxy,
    headers: { 'x-forwarded-for': REMOTE, ...headers },
  });
  const features = (proxy: string, headers: Record<string, string>) =>
    gateway.inject({ method: 'GET', url: '/org/features', ...viaProxy(proxy, headers) });

  it('are limited on forwarded /org routes as on the eval route: the same lookups, then 429', async () => {
    const onEvals = await statuses(LIMIT + 5, () =>
      gateway.inject({
        method: 'POST',
        url: '/org/subscribers/alice/entitlements/check',
        payload: { feature: 'sso' },
        ...viaProxy('127.0.0.2', { 'x-api-key': randomKey() }),
      }),
    );
    const queries = ctx.queriesRun();
    const onForwarded = await statuses(LIMIT + 5, () => features('127.0.0.2', { 'x-api-key': randomKey() }));
    expect(onForwarded).toEqual({ 401: LIMIT, 429: 5 });
    expect(onForwarded).toEqual(onEvals);
    expect(ctx.queriesRun() - queries).toBe(LIMIT);
    // Keys that work still do.
    expect((await features('127.0.0.2', { 'x-api-key': org.api_key })).statusCode).toBe(200);
  });

  it('are limited on session cookies too, charged to the same bucket as their keys', async () => {
    const cookie = () => ({ cookie: `${SESSION_COOKIE}=${generateSessionToken().token}` });
    const seen = await statuses(LIMIT + 5, (i) =>
      features('127.0.0.3', i % 2 === 0 ? cookie() : { 'x-api-key': randomKey() }),
    );
    expect(seen).toEqual({ 401: LIMIT, 429: 5 });
    const limited = await features('127.0.0.3', cookie());
    expect(limited.json().error.code).toBe('RATE_LIMITED');
  });

  it("cannot pass as local by sending the gateway's statement themselves", async () => {
    const seen = await statuses(LIMIT + 5, () =>
      features('127.0.0.4', { 'x-api-key': randomKey(), [GATEWAY_FAILURE_LIMIT_HEADER]: '127.0.0.1' }),
    );
    expect(seen).toEqual({ 401: LIMIT, 429: 5 });
  });

  it('leave a client on this machine calling the gateway directly exempt, on forwarded routes too', async () => {
    const seen = await statuses(LIMIT + 5, () =>
      gateway.inject({
        method: 'GET',
        url: '/org/features',
        headers: { 'x-api-key': randomKey() },
        remoteAddress: '127.0.0.1',
      }),
    );
    expect(seen).toEqual({ 401: LIMIT + 5 });
  });
});

describe('admin, for a request that carries no statement from a gateway it believes', () => {
  const features = (headers: Record<string, string>) =>
    ctx.app.inject({
      method: 'GET',
      url: '/org/features',
      headers: { 'x-api-key': randomKey(), ...headers },
      remoteAddress: '127.0.0.1',
    });

  it('limits one relayed from a loopback address: being relayed locally never makes a client local', async () => {
    const seen = await statuses(LIMIT + 5, () => features({ 'x-forwarded-for': '127.0.0.5' }));
    expect(seen).toEqual({ 401: LIMIT, 429: 5 });
  });

  it('ignores a statement (without INTERNAL_TOKEN) that disagrees with the address forwarded beside it', async () => {
    const seen = await statuses(LIMIT + 5, () =>
      features({ 'x-forwarded-for': '198.51.100.40', [GATEWAY_FAILURE_LIMIT_HEADER]: '127.0.0.1' }),
    );
    expect(seen).toEqual({ 401: LIMIT, 429: 5 });
  });
});

describe('with INTERNAL_TOKEN, admin believes only the statement that comes with it', () => {
  const TOKEN = 'gateway-admin-shared-token';
  let tokenCtx: AdminTestContext;
  let tokenGateway: GatewayApp;

  beforeAll(async () => {
    tokenCtx = await createAdminContext({
      clock,
      config: { authFailuresPerMinute: LIMIT, internalToken: TOKEN },
    });
    tokenGateway = await gatewayOverAdmin(tokenCtx, { clock });
  });
  afterAll(async () => {
    await tokenGateway?.close();
    await tokenCtx?.close();
  });

  it("limits a forwarded request by the gateway's statement, and exempts the gateway's local clients", async () => {
    const through = (remoteAddress: string, headers: Record<string, string>) =>
      tokenGateway.inject({
        method: 'GET',
        url: '/org/features',
        headers: { 'x-api-key': randomKey(), ...headers },
        remoteAddress,
      });
    expect(
      await statuses(LIMIT + 5, () => through('127.0.0.6', { 'x-forwarded-for': '203.0.113.6' })),
    ).toEqual({
      401: LIMIT,
      429: 5,
    });
    expect(await statuses(LIMIT + 5, () => through('127.0.0.1', {}))).toEqual({ 401: LIMIT + 5 });
  });

  it('ignores a statement without the token, even one that agrees with its X-Forwarded-For', async () => {
    const straight = (headers: Record<string, string>) =>
      tokenCtx.app.inject({
        method: 'GET',
        url: '/org/features',
        headers: {
          'x-api-key': randomKey(),
          'x-forwarded-for': '127.0.0.7',
          [GATEWAY_FAILURE_LIMIT_HEADER]: '127.0.0.7',
          ...headers,
        },
        remoteAddress: '127.0.0.1',
      });
    expect(await statuses(LIMIT + 5, () => straight({ 'x-internal-token': 'not-the-token' }))).toEqual({
      401: LIMIT,
      429: 5,
    });
    expect(await statuses(LIMIT + 5, () => straight({ 'x-internal-token': TOKEN }))).toEqual({
      401: LIMIT + 5,
    });
  });
});
