import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { publishArrangement, saveArrangement, type Arrangement } from '@ent/common/metering/arrangement';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { buildGatewayApp, type GatewayApp } from '../../src/app.ts';
import { catalogClient, injector, seedProPlan } from '../helpers.ts';

const START = Date.UTC(2031, 4, 10, 12, 0, 0, 0);
const DAY = 24 * 60 * 60 * 1000;
const clock = new ManualClock(START);
const ORIGIN = 'https://app.example.com';
let ctx: AdminTestContext;
let gateway: GatewayApp;
let org: TestOrganization;

/** A fresh organization: flags sso/audit, limits seats/storage/api_calls, alice on `pro`, bob on nothing. */
async function organizationWith(arrangement: Arrangement): Promise<TestOrganization> {
  const created = await createTestOrganization(ctx.db, `OFREP ${Math.random()}`);
  await saveArrangement(ctx.db, created.organization_id, arrangement);
  await publishArrangement(ctx.redis, ctx.app.redisKeys, created.organization_id, arrangement);
  const api = catalogClient(injector(gateway), created.headers);
  await seedProPlan(api);
  await api.feature('audit', 'flag');
  await api.feature('api_calls', 'limit');
  await api.subscriber('bob');
  await api.override('bob', 'audit', { kind: 'flag', allowed: true });
  await api.override('bob', 'seats', { kind: 'limit', limit: 7 });
  return created;
}

type Headers = Record<string, string>;
const single = (key: string, body: unknown, headers: Headers = org.headers, target = gateway) =>
  target.inject({ method: 'POST', url: `/ofrep/v1/evaluate/flags/${key}`, headers, payload: body as object });
const bulk = (body: unknown, headers: Headers = org.headers, target = gateway) =>
  target.inject({ method: 'POST', url: '/ofrep/v1/evaluate/flags', headers, payload: body as object });
const as = (targetingKey: string) => ({ context: { targetingKey, plan: 'ignored' } });
const evalCount = async (of: TestOrganization = org): Promise<number> =>
  (await gateway.inject({ method: 'GET', url: '/org/usage/current', headers: of.headers })).json().count;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = ctx.app.server.address() as AddressInfo;
  gateway = await buildGatewayApp({
    config: { ...ctx.config, adminUrl: `http://127.0.0.1:${port}`, ofrepCorsOrigins: [ORIGIN] },
    clock,
    logger: false,
  });
  await gateway.ready();
  org = await organizationWith({ plan: 'free', evalLimit: 1000, blocking: true, burstPerSecond: 10_000 });
});

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

describe('OFREP single flag: the mapping', () => {
  it.each([
    [
      'alice',
      'sso',
      { value: true, reason: 'STATIC', variant: 'plan', metadata: { source: 'plan', kind: 'flag' } },
    ],
    [
      'alice',
      'audit',
      { value: false, reason: 'STATIC', variant: 'none', metadata: { source: 'none', kind: 'flag' } },
    ],
    [
      'bob',
      'audit',
      {
        value: true,
        reason: 'TARGETING_MATCH',
        variant: 'override',
        metadata: { source: 'override', kind: 'flag' },
      },
    ],
    [
      'alice',
      'seats',
      {
        value: 25,
        reason: 'STATIC',
        variant: 'plan',
        metadata: { source: 'plan', kind: 'limit', unlimited: false },
      },
    ],
    [
      'alice',
      'api_calls',
      {
        value: 0,
        reason: 'STATIC',
        variant: 'none',
        metadata: { source: 'none', kind: 'limit', unlimited: false },
      },
    ],
    [
      'alice',
      'storage',
      {
        value: Number.MAX_SAFE_INTEGER,
        reason: 'STATIC',
        variant: 'plan',
        metadata: { source: 'plan', kind: 'limit', unlimited: true },
      },
    ],
    [
      'bob',
      'seats',
      {
        value: 7,
        reason: 'TARGETING_MATCH',
        variant: 'override',
        metadata: { source: 'override', kind: 'limit', unlimited: false },
      },
    ],
  ])('%s / %s', async (subscriber, key, expected) => {
    const res = await single(key, as(subscriber));
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.json()).toEqual({ key, ...expected });
    expect(res.headers['x-svc-eval-limit']).toBe('1000');
  });

  it('accepts Authorization: Bearer as well as X-API-Key', async () => {
    const res = await single('sso', as('alice'), { authorization: `Bearer ${org.headers['x-api-key']}` });
    expect(res.statusCode).toBe(200);
    expect(res.json().value).toBe(true);
  });
});

describe('OFREP errors', () => {
  it('401 and 403 without a body', async () => {
    const unauthenticated: Headers[] = [
      {},
      { 'x-api-key': 'svc-mk-1-nonsense' },
      { authorization: 'Bearer nonsense' },
    ];
    for (const headers of unauthenticated) {
      const res = await single('sso', as('alice'), headers);
      expect(res.statusCode).toBe(401);
      expect(res.body).toBe('');
    }
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:read']);
    const forbidden = await bulk(as('alice'), { 'x-api-key': apiKey });
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.body).toBe('');
  });

  it('400 TARGETING_KEY_MISSING (bulk: no key), before any eval is counted', async () => {
    const before = await evalCount();
    for (const body of [{ context: {} }, {}, { context: { targetingKey: '' } }]) {
      const res = await single('sso', body);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ key: 'sso', errorCode: 'TARGETING_KEY_MISSING' });
    }
    const res = await bulk({ context: { email: 'x@example.com' } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ errorCode: 'TARGETING_KEY_MISSING', errorDetails: expect.any(String) });
    expect(await evalCount()).toBe(before);
  });

  it('400 INVALID_CONTEXT with errorDetails for an unknown subscriber, not counted', async () => {
    const before = await evalCount();
    const res = await single('sso', as('nobody'));
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      key: 'sso',
      errorCode: 'INVALID_CONTEXT',
      errorDetails: 'No subscriber "nobody".',
    });
    const many = await bulk(as('nobody'));
    expect(many.statusCode).toBe(400);
    expect(many.json()).toEqual({ errorCode: 'INVALID_CONTEXT', errorDetails: 'No subscriber "nobody".' });
    expect(await evalCount()).toBe(before);
  });

  it('404 FLAG_NOT_FOUND for an unknown feature, not counted', async () => {
    const before = await evalCount();
    const res = await single('nope', as('alice'));
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ key: 'nope', errorCode: 'FLAG_NOT_FOUND' });
    expect(await evalCount()).toBe(before);
  });

  it("404 FLAG_NOT_FOUND, with OFREP's body, for a key no feature can have: empty, too long, far too long", async () => {
    const before = await evalCount();
    const empty = await single('', as('alice'));
    expect(empty.statusCode).toBe(404);
    expect(empty.json()).toEqual({
      key: '',
      errorCode: 'FLAG_NOT_FOUND',
      errorDetails: 'No feature with key "".',
    });
    const long = 'k'.repeat(300);
    const tooLong = await single(long, as('alice'));
    expect(tooLong.statusCode).toBe(404);
    expect(tooLong.json()).toMatchObject({ key: long, errorCode: 'FLAG_NOT_FOUND' });
    const farTooLong = await single('k'.repeat(2000), as('alice'));
    expect(farTooLong.statusCode, farTooLong.body).toBe(404);
    expect(farTooLong.json()).toEqual({
      errorCode: 'FLAG_NOT_FOUND',
      errorDetails: 'No feature has a key that long.',
    });
    // Elsewhere an over-long path value keeps SPEC.md's error body.
    const subscriber = await gateway.inject({
      method: 'POST',
      url: `/org/subscribers/${'s'.repeat(2000)}/entitlements/check`,
      headers: org.headers,
      payload: { feature: 'sso' },
    });
    expect(subscriber.statusCode).toBe(404);
    expect(subscriber.json().error.code).toBe('NOT_FOUND');
    expect(await evalCount()).toBe(before);
  });

  it('400 PARSE_ERROR for a malformed request', async () => {
    const res = await single('sso', { context: 'alice' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ key: 'sso', errorCode: 'PARSE_ERROR' });
    const notJson = await gateway.inject({
      method: 'POST',
      url: '/ofrep/v1/evaluate/flags',
      headers: { ...org.headers, 'content-type': 'application/json' },
      payload: '{',
    });
    expect(notJson.statusCode).toBe(400);
    expect(notJson.json()).toMatchObject({ errorCode: 'PARSE_ERROR' });
  });

  it('429 with Retry-After in integer seconds and no body past the burst; only the 200s count', async () => {
    const limited = await organizationWith({
      plan: 'free',
      evalLimit: 1000,
      blocking: true,
      burstPerSecond: 3,
    });
    const before = await evalCount(limited);
    const answers = [];
    for (let i = 0; i < 6; i++)
      answers.push(
        i % 2 ? await bulk(as('alice'), limited.headers) : await single('sso', as('alice'), limited.headers),
      );
    expect(answers.map((res) => res.statusCode)).toEqual([200, 200, 200, 429, 429, 429]);
    expect(answers[3]!.headers['retry-after']).toMatch(/^\d+$/);
    expect(answers[3]!.body).toBe('');
    expect(await evalCount(limited)).toBe(before + 3);
  });
});

describe('OFREP metering and bulk', () => {
  it('counts each request as exactly one eval, bulk included', async () => {
    const before = await evalCount();
    await single('sso', as('alice'));
    await single('seats', as('bob'));
    await bulk(as('alice'));
    expect(await evalCount()).toBe(before + 3);
  });

  it('bulk returns every catalog feature ordered by key, with a strong ETag, 304 (not counted) on If-None-Match', async () => {
    // A subscriber of its own, like bob (overrides on audit and seats): this case deletes one of them.
    const api = catalogClient(injector(gateway), org.headers);
    await api.subscriber('bulk-bob');
    await api.override('bulk-bob', 'audit', { kind: 'flag', allowed: true });
    await api.override('bulk-bob', 'seats', { kind: 'limit', limit: 7 });
    const res = await bulk(as('bulk-bob'));
    expect(res.statusCode).toBe(200);
    const { flags } = res.json();
    expect(flags.map((flag: { key: string }) => flag.key)).toEqual([
      'api_calls',
      'audit',
      'seats',
      'sso',
      'storage',
    ]);
    expect(flags[1]).toEqual({
      key: 'audit',
      value: true,
      reason: 'TARGETING_MATCH',
      variant: 'override',
      metadata: { source: 'override', kind: 'flag' },
    });
    const etag = res.headers.etag as string;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{27}"$/);

    const before = await evalCount();
    const again = await bulk(as('bulk-bob'), { ...org.headers, 'if-none-match': etag });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
    expect(again.headers.etag).toBe(etag);
    expect(await evalCount()).toBe(before);

    await api.deleteOverride('bulk-bob', 'audit');
    const changed = await bulk(as('bulk-bob'), { ...org.headers, 'if-none-match': etag });
    expect(changed.statusCode).toBe(200);
    expect(changed.headers.etag).not.toBe(etag);
    expect(changed.json().flags[1]).toMatchObject({ key: 'audit', value: false, reason: 'STATIC' });
  });

  it('409 with the error body when the organization is blocked', async () => {
    const blocked = await organizationWith({
      plan: 'free',
      evalLimit: 1,
      blocking: true,
      burstPerSecond: 10_000,
    });
    expect((await single('sso', as('alice'), blocked.headers)).statusCode).toBe(200);
    expect((await single('sso', as('alice'), blocked.headers)).statusCode).toBe(200);
    clock.advance(8 * DAY);
    for (const res of [
      await single('sso', as('alice'), blocked.headers),
      await bulk(as('alice'), blocked.headers),
    ]) {
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toMatchObject({ code: 'CONFLICT', details: { field: 'evals' } });
    }
  });
});

describe('OFREP CORS', () => {
  it('answers a preflight from an allowed origin, allowing If-None-Match', async () => {
    const res = await gateway.inject({
      method: 'OPTIONS',
      url: '/ofrep/v1/evaluate/flags',
      headers: {
        origin: ORIGIN,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'if-none-match',
      },
    });
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(res.headers['access-control-allow-headers']).toContain('If-None-Match');
    expect(res.headers['access-control-allow-methods']).toContain('POST');
  });

  it('exposes ETag to an allowed origin, and says nothing to another', async () => {
    const allowed = await bulk(as('alice'), { ...org.headers, origin: ORIGIN });
    expect(allowed.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(allowed.headers['access-control-expose-headers']).toContain('ETag');
    const other = await single('sso', as('alice'), { ...org.headers, origin: 'https://evil.example.com' });
    expect(other.statusCode).toBe(200);
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    const preflight = await gateway.inject({
      method: 'OPTIONS',
      url: '/ofrep/v1/evaluate/flags/sso',
      headers: { origin: 'https://evil.example.com' },
    });
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('OFREP in /openapi.json', () => {
  it('lists both routes with their OFREP responses', async () => {
    const { paths } = (await gateway.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(Object.keys(paths['/ofrep/v1/evaluate/flags/{key}'].post.responses)).toEqual(
      expect.arrayContaining(['200', '400', '404', '429']),
    );
    expect(Object.keys(paths['/ofrep/v1/evaluate/flags'].post.responses)).toEqual(
      expect.arrayContaining(['200', '304', '400']),
    );
    expect(paths['/org/subscribers/{subscriber_id}/entitlements'].get.responses['304']).toBeDefined();
  });
});
