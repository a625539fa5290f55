import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

let ctx: AdminTestContext;
let org: TestOrganization;
let other: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Acme');
  other = await createTestOrganization(ctx.db, 'Other');
});
afterAll(() => ctx.close());

const post = (headers: Record<string, string>, payload: unknown) =>
  ctx.app.inject({ method: 'POST', url: '/org/features', headers, payload: payload as object });

describe('features', () => {
  it('creates a feature and returns it with 201', async () => {
    const res = await post(org.headers, { key: 'sso', name: 'Single sign-on', kind: 'flag' });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ key: 'sso', name: 'Single sign-on', kind: 'flag', description: '' });
    expect(res.headers['x-request-id']).toMatch(/^req_/);
  });

  it('refuses a duplicate key with 409 CONFLICT', async () => {
    await post(org.headers, { key: 'seats', name: 'Seats', kind: 'limit' });
    const res = await post(org.headers, { key: 'seats', name: 'Seats again', kind: 'limit' });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({ code: 'CONFLICT', type: 'invalid_request_error' });
    expect(res.json().error.request_id).toBe(res.headers['x-request-id']);
  });

  it.each([
    [{ name: 'x', kind: 'flag' }, 'key'],
    [{ key: 'Bad Key', name: 'x', kind: 'flag' }, 'key'],
    [{ key: 'ok', name: '', kind: 'flag' }, 'name'],
    [{ key: 'ok', name: 'x', kind: 'toggle' }, 'kind'],
    [{ key: 'ok', name: 'x', kind: 'flag', extra: 1 }, 'extra'],
  ])('refuses %j with 422 VALIDATION_ERROR on %s', async (payload, field) => {
    const res = await post(org.headers, payload);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
  });

  it('names the allowed values when a kind is not one of them (body and query)', async () => {
    const body = await post(org.headers, { key: 'ok', name: 'x', kind: 'toggle' });
    expect(body.json().error.message).toBe('kind must be one of: flag, limit, metered');
    const query = await ctx.app.inject({ method: 'GET', url: '/org/plans?kind=other', headers: org.headers });
    expect(query.statusCode).toBe(422);
    expect(query.json().error).toMatchObject({
      message: 'kind must be one of: catalog, custom',
      details: { field: 'kind', location: 'querystring' },
    });
  });

  it('answers malformed JSON with 422, not 500', async () => {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/org/features',
      headers: { ...org.headers, 'content-type': 'application/json' },
      payload: '{"key": ',
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().error.code).toBe('VALIDATION_ERROR');
  });

  it.each(['text/plain', 'text/plain; charset=utf-8', 'application/x-www-form-urlencoded'])(
    'answers a %s body with 415 UNSUPPORTED_MEDIA_TYPE',
    async (contentType) => {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/org/features',
        headers: { ...org.headers, 'content-type': contentType },
        payload: '{"key":"typed","name":"x","kind":"flag"}',
      });
      expect(res.statusCode).toBe(415);
      expect(res.json().error).toMatchObject({
        code: 'UNSUPPORTED_MEDIA_TYPE',
        type: 'invalid_request_error',
      });
    },
  );

  it('updates name and description, and keeps the rest', async () => {
    await post(org.headers, { key: 'api-calls', name: 'API calls', kind: 'limit' });
    const res = await ctx.app.inject({
      method: 'PATCH',
      url: '/org/features/api-calls',
      headers: org.headers,
      payload: { description: 'Calls per month' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      key: 'api-calls',
      name: 'API calls',
      description: 'Calls per month',
      kind: 'limit',
    });
  });

  it('refuses to change kind or key on PATCH', async () => {
    const res = await ctx.app.inject({
      method: 'PATCH',
      url: '/org/features/sso',
      headers: org.headers,
      payload: { kind: 'limit' },
    });
    expect(res.statusCode).toBe(422);
  });

  it('creates a metered feature, lists it under kind=metered and keeps its kind on PATCH', async () => {
    const own = await createTestOrganization(ctx.db, 'Metered');
    const created = await post(own.headers, { key: 'api-calls', name: 'API calls', kind: 'metered' });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({ key: 'api-calls', kind: 'metered' });
    expect((await post(own.headers, { key: 'seats', name: 'Seats', kind: 'limit' })).statusCode).toBe(201);
    const listed = await ctx.app.inject({
      method: 'GET',
      url: '/org/features?kind=metered',
      headers: own.headers,
    });
    expect(listed.json()).toMatchObject({
      features: [{ key: 'api-calls', kind: 'metered' }],
      has_more: false,
    });
    expect(listed.json().features).toHaveLength(1);
    const read = await ctx.app.inject({
      method: 'GET',
      url: '/org/features/api-calls',
      headers: own.headers,
    });
    expect(read.json()).toEqual(created.json());
    const patched = await ctx.app.inject({
      method: 'PATCH',
      url: '/org/features/api-calls',
      headers: own.headers,
      payload: { kind: 'limit' },
    });
    expect(patched.statusCode).toBe(422);
    expect(patched.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'kind' } });
    const after = await ctx.app.inject({
      method: 'GET',
      url: '/org/features/api-calls',
      headers: own.headers,
    });
    expect(after.json().kind).toBe('metered');
  });

  it('lists features by key with cursor pagination', async () => {
    const own = await createTestOrganization(ctx.db, 'Listing');
    for (const [key, kind] of [
      ['sso', 'flag'],
      ['seats', 'limit'],
      ['api-calls', 'limit'],
    ]) {
      expect((await post(own.headers, { key, name: key, kind })).statusCode).toBe(201);
    }
    const first = await ctx.app.inject({ method: 'GET', url: '/org/features?limit=2', headers: own.headers });
    expect(first.statusCode).toBe(200);
    const body = first.json();
    expect(body.features.map((f: { key: string }) => f.key)).toEqual(['api-calls', 'seats']);
    expect(body.has_more).toBe(true);
    const next = await ctx.app.inject({
      method: 'GET',
      url: '/org/features?limit=2&starting_after=seats',
      headers: own.headers,
    });
    expect(next.json()).toMatchObject({ features: [{ key: 'sso' }], has_more: false });
  });

  it.each(['nope', 'zzz', 'a'])(
    'refuses starting_after=%s, which names no feature, with 422',
    async (cursor) => {
      const res = await ctx.app.inject({
        method: 'GET',
        url: `/org/features?starting_after=${cursor}`,
        headers: org.headers,
      });
      expect(res.statusCode).toBe(422);
      expect(res.json().error).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: { field: 'starting_after', value: cursor },
      });
    },
  );

  it('refuses unknown query parameters with 422', async () => {
    const res = await ctx.app.inject({
      method: 'GET',
      url: '/org/features?colour=blue',
      headers: org.headers,
    });
    expect(res.statusCode).toBe(422);
  });

  it('answers 404 for an unknown feature', async () => {
    const res = await ctx.app.inject({ method: 'GET', url: '/org/features/nope', headers: org.headers });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });

  it('answers 404 NOT_FOUND for a path id longer than any id can be, on reads and writes alike', async () => {
    for (const [method, url] of [
      ['GET', `/org/features/${'k'.repeat(256)}`],
      ['PATCH', `/org/features/${'k'.repeat(300)}`],
      ['DELETE', `/org/plans/${'p'.repeat(256)}`],
      ['GET', `/org/subscribers/${'s'.repeat(300)}`],
      ['GET', `/org/subscribers/${'s'.repeat(1000)}/overrides`],
      ['GET', '/org/features/'],
      ['DELETE', '/org/plans/'],
    ] as const) {
      const res = await ctx.app.inject({
        method,
        url,
        headers: org.headers,
        ...(method === 'PATCH' ? { payload: { name: 'x' } } : {}),
      });
      expect(res.statusCode, `${method} ${url.slice(0, 30)}`).toBe(404);
      expect(res.json().error).toMatchObject({ type: 'invalid_request_error', code: 'NOT_FOUND' });
    }
  });

  it("never shows or changes another organization's features", async () => {
    const read = await ctx.app.inject({ method: 'GET', url: '/org/features/sso', headers: other.headers });
    expect(read.statusCode).toBe(404);
    const change = await ctx.app.inject({
      method: 'PATCH',
      url: '/org/features/sso',
      headers: other.headers,
      payload: { name: 'x' },
    });
    expect(change.statusCode).toBe(404);
    const list = await ctx.app.inject({ method: 'GET', url: '/org/features', headers: other.headers });
    expect(list.json().features).toEqual([]);
  });

  it('answers 401 without a key and with a malformed key', async () => {
    const none = await ctx.app.inject({ method: 'GET', url: '/org/features' });
    expect(none.statusCode).toBe(401);
    expect(none.json().error.code).toBe('UNAUTHENTICATED');
    const bad = await ctx.app.inject({
      method: 'GET',
      url: '/org/features',
      headers: { 'x-api-key': 'svc-mk-1-nope' },
    });
    expect(bad.statusCode).toBe(401);
  });
});

describe('feature scopes', () => {
  it('gives a check-only key 403 on POST /org/features, not 401', async () => {
    const { createKeyWithScopes } = await import('../../../test-support/api-keys.ts');
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    const res = await post({ 'x-api-key': apiKey }, { key: 'nope', name: 'x', kind: 'flag' });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toMatchObject({ code: 'FORBIDDEN', type: 'permission_error' });
  });

  it('does not let catalog:write read (a write scope does not include read)', async () => {
    const { createKeyWithScopes } = await import('../../../test-support/api-keys.ts');
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:write']);
    const read = await ctx.app.inject({
      method: 'GET',
      url: '/org/features',
      headers: { 'x-api-key': apiKey },
    });
    expect(read.statusCode).toBe(403);
    const write = await post({ 'x-api-key': apiKey }, { key: 'writer-made', name: 'x', kind: 'flag' });
    expect(write.statusCode).toBe(201);
  });

  it('limits a viewer to reads even with a full-access key', async () => {
    const { createKeyWithScopes } = await import('../../../test-support/api-keys.ts');
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, [], 'viewer');
    expect(
      (await ctx.app.inject({ method: 'GET', url: '/org/features', headers: { 'x-api-key': apiKey } }))
        .statusCode,
    ).toBe(200);
    expect(
      (await post({ 'x-api-key': apiKey }, { key: 'viewer-made', name: 'x', kind: 'flag' })).statusCode,
    ).toBe(403);
  });
});

describe('NUL characters (DESIGN.md §2 property 7: never a 500)', () => {
  const inject = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
    ctx.app.inject({ method, url, headers: org.headers, ...(payload === undefined ? {} : { payload }) });

  it.each([
    ['POST', '/org/features', { key: 'nul', name: 'a\u0000b', kind: 'flag' }, 'name', 'body'],
    ['PATCH', '/org/features/sso', { description: 'x\u0000' }, 'description', 'body'],
    ['POST', '/org/subscribers', { subscriber_id: 'nul', name: 'a\u0000b' }, 'name', 'body'],
    [
      'POST',
      '/org/plans',
      { key: 'nul', name: 'N', kind: 'custom', grants: [{ feature: 'a\u0000', kind: 'flag' }] },
      'grants.0.feature',
      'body',
    ],
    ['GET', '/org/features?starting_after=%00', undefined, 'starting_after', 'querystring'],
    ['GET', '/org/subscribers?starting_after=a%00b', undefined, 'starting_after', 'querystring'],
    ['GET', '/org/members?starting_after=%00', undefined, 'starting_after', 'querystring'],
    ['GET', '/org/audit-events?route=/org/a%00b', undefined, 'route', 'querystring'],
    ['GET', '/org/audit-events?params%5Bkey%5D=a%00b', undefined, 'params[key]', 'querystring'],
    ['GET', '/org/features/a%00b', undefined, 'key', 'params'],
    ['GET', '/org/subscribers/a%00b', undefined, 'subscriber_id', 'params'],
  ] as const)('%s %s is 422 VALIDATION_ERROR on %s', async (method, url, payload, field, location) => {
    const res = await inject(method, url, payload);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field, location } });
  });

  it('an audited write with NUL in a path value is 422 (not 503) and still recorded', async () => {
    const res = await inject('PATCH', '/org/features/a%00b', { name: 'x' });
    expect(res.statusCode).toBe(422);
    expect(res.json().error.details).toMatchObject({ field: 'key', location: 'params' });
    const requestId = res.headers['x-request-id'] as string;
    const log = await inject('GET', `/org/audit-events?request_id=${requestId}`);
    expect(log.json().audit_events).toEqual([
      expect.objectContaining({
        route: '/org/features/{key}',
        params: { key: 'a\uFFFDb' },
        outcome: 'responded',
        status: 422,
      }),
    ]);
  });

  it('the gateway rebuild route reports a NUL subscriber id as unknown, not a database error', async () => {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/internal/snapshots/subscriber',
      payload: { organization_id: org.organization_id, subscriber_id: 'a\u0000b' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ version: 0, doc: { exists: false } });
  });
});
