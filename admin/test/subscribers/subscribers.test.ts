import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
  subscriberVersion,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';

let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Acme');
});
afterAll(() => ctx.close());

const create = (payload: unknown, headers = org.headers) =>
  ctx.app.inject({ method: 'POST', url: '/org/subscribers', headers, payload: payload as object });
const patch = (id: string, payload: unknown, headers = org.headers) =>
  ctx.app.inject({
    method: 'PATCH',
    url: `/org/subscribers/${encodeURIComponent(id)}`,
    headers,
    payload: payload as object,
  });
const get = (url: string, headers = org.headers) => ctx.app.inject({ method: 'GET', url, headers });

const versionOf = (subscriberId: string) => subscriberVersion(ctx.db, org.organization_id, subscriberId);

describe('POST /org/subscribers', () => {
  it('creates a subscriber and returns it with 201', async () => {
    const res = await create({ subscriber_id: 'cus_123', name: 'Globex' });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      subscriber_id: 'cus_123',
      name: 'Globex',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: expect.any(String),
    });
    expect(await versionOf('cus_123')).toBeGreaterThan(0);
  });

  it('accepts a subscriber without a name (name null) and ids with @ . : + -', async () => {
    const res = await create({ subscriber_id: 'user+1@example.com' });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ subscriber_id: 'user+1@example.com', name: null });
  });

  it('refuses an existing subscriber_id with 409 CONFLICT', async () => {
    await create({ subscriber_id: 'dup' });
    const res = await create({ subscriber_id: 'dup', name: 'Again' });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({
      code: 'CONFLICT',
      details: { field: 'subscriber_id', value: 'dup' },
    });
    expect((await get('/org/subscribers/dup')).json().name).toBeNull();
  });

  it.each([
    [{}, 'subscriber_id'],
    [{ subscriber_id: '' }, 'subscriber_id'],
    [{ subscriber_id: 'has space' }, 'subscriber_id'],
    [{ subscriber_id: '-leading-dash' }, 'subscriber_id'],
    [{ subscriber_id: 'a/b' }, 'subscriber_id'],
    [{ subscriber_id: 'x'.repeat(256) }, 'subscriber_id'],
    [{ subscriber_id: 42 }, 'subscriber_id'],
    [{ subscriber_id: 'ok-1', name: 'n'.repeat(256) }, 'name'],
    [{ subscriber_id: 'ok-1', name: 7 }, 'name'],
    [{ subscriber_id: 'ok-1', plan: 'pro' }, 'plan'],
  ])('refuses %j with 422 VALIDATION_ERROR on %s', async (payload, field) => {
    const res = await create(payload);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
  });

  it('accepts a 255-character id', async () => {
    expect((await create({ subscriber_id: 'y'.repeat(255) })).statusCode).toBe(201);
  });
});

describe('PATCH /org/subscribers/{subscriber_id}', () => {
  it('changes the name and bumps the subscriber version', async () => {
    await create({ subscriber_id: 'renamed', name: 'Old' });
    const before = await versionOf('renamed');
    const res = await patch('renamed', { name: 'New' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ subscriber_id: 'renamed', name: 'New' });
    expect(await versionOf('renamed')).toBe(before + 1);
    expect((await get('/org/subscribers/renamed')).json().name).toBe('New');
  });

  it('clears the name with null', async () => {
    await create({ subscriber_id: 'cleared', name: 'Old' });
    const res = await patch('cleared', { name: null });
    expect(res.statusCode).toBe(200);
    expect(res.json().name).toBeNull();
  });

  it('changes nothing when the name is the same', async () => {
    await create({ subscriber_id: 'same', name: 'Same' });
    const before = await versionOf('same');
    const res = await patch('same', { name: 'Same' });
    expect(res.statusCode).toBe(200);
    expect(await versionOf('same')).toBe(before);
  });

  it('answers 404 for an unknown subscriber', async () => {
    const res = await patch('nobody', { name: 'x' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatchObject({
      code: 'NOT_FOUND',
      details: { field: 'subscriber_id', value: 'nobody' },
    });
  });

  it('treats an empty body as a change of nothing, like the other PATCH routes', async () => {
    await create({ subscriber_id: 'empty-body', name: 'Kept' });
    const before = await versionOf('empty-body');
    const res = await patch('empty-body', {});
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ subscriber_id: 'empty-body', name: 'Kept' });
    expect(await versionOf('empty-body')).toBe(before);
  });

  it.each([[{ subscriber_id: 'other' }], [{ name: 5 }]])('refuses %j with 422', async (payload) => {
    const res = await patch('renamed', payload);
    expect(res.statusCode).toBe(422);
    expect(res.json().error.code).toBe('VALIDATION_ERROR');
  });
});

describe('GET /org/subscribers', () => {
  it('lists subscribers ordered by subscriber_id with cursor pagination', async () => {
    const local = await createTestOrganization(ctx.db, 'Listing');
    for (const id of ['c', 'a', 'd', 'b'])
      expect((await create({ subscriber_id: id }, local.headers)).statusCode).toBe(201);
    const first = await get('/org/subscribers?limit=3', local.headers);
    expect(first.statusCode).toBe(200);
    expect(first.json().subscribers.map((s: { subscriber_id: string }) => s.subscriber_id)).toEqual([
      'a',
      'b',
      'c',
    ]);
    expect(first.json().has_more).toBe(true);
    const next = await get('/org/subscribers?limit=3&starting_after=c', local.headers);
    expect(next.json()).toMatchObject({ subscribers: [{ subscriber_id: 'd' }], has_more: false });
    const all = await get('/org/subscribers', local.headers);
    expect(all.json().subscribers).toHaveLength(4);
    expect(all.json().has_more).toBe(false);
  });

  it.each(['0', 'zzz', 'nobody'])(
    'refuses starting_after=%s, which names no subscriber, with 422',
    async (cursor) => {
      const res = await get(`/org/subscribers?starting_after=${cursor}`);
      expect(res.statusCode).toBe(422);
      expect(res.json().error).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: { field: 'starting_after', value: cursor },
      });
    },
  );

  it.each(['limit=0', 'limit=101', 'limit=abc', 'limit=0x10', 'limit= 5', 'colour=blue', 'starting_after='])(
    'refuses ?%s with 422',
    async (query) => {
      const res = await get(`/org/subscribers?${query}`);
      expect(res.statusCode).toBe(422);
      expect(res.json().error.code).toBe('VALIDATION_ERROR');
    },
  );
});

describe('GET /org/subscribers/{subscriber_id}', () => {
  it('returns one subscriber', async () => {
    await create({ subscriber_id: 'cus_read', name: 'Globex' });
    const res = await get('/org/subscribers/cus_read');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ subscriber_id: 'cus_read', name: 'Globex' });
  });

  it('answers 404 for an unknown or malformed id', async () => {
    expect((await get('/org/subscribers/missing')).statusCode).toBe(404);
    expect((await get('/org/subscribers/Not%20An%20Id')).statusCode).toBe(404);
  });
});

describe('subscriber scopes', () => {
  it('reads with subscribers:read and writes with subscribers:write only', async () => {
    const reader = {
      'x-api-key': (await createKeyWithScopes(ctx.db, org.organization_id, ['subscribers:read'])).apiKey,
    };
    const writer = {
      'x-api-key': (await createKeyWithScopes(ctx.db, org.organization_id, ['subscribers:write'])).apiKey,
    };
    expect((await get('/org/subscribers', reader)).statusCode).toBe(200);
    expect((await create({ subscriber_id: 'by-reader' }, reader)).statusCode).toBe(403);
    expect((await get('/org/subscribers', writer)).statusCode).toBe(403);
    expect((await create({ subscriber_id: 'by-writer' }, writer)).statusCode).toBe(201);
    expect((await patch('by-writer', { name: 'w' }, writer)).statusCode).toBe(200);
    expect((await patch('by-writer', { name: 'r' }, reader)).statusCode).toBe(403);
  });
});
