import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestOrganization, type AdminTestContext, type TestOrganization } from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import {
  caller,
  identityTestContext,
  lastWrite,
  type CommittedWrite,
  type IdentityTestContext,
} from '../../../test-support/identity-context.ts';

let ctx: AdminTestContext;
let org: TestOrganization;
let other: TestOrganization;
let writes: CommittedWrite[];
let api: IdentityTestContext['api'];

beforeAll(async () => {
  ({ ctx, org, other, writes, api } = await identityTestContext());
});
afterAll(() => ctx.close());

describe('GET /org', () => {
  it('returns the organization of the key', async () => {
    const fresh = await createTestOrganization(ctx.db, 'Acme');
    const res = await ctx.app.inject({ method: 'GET', url: '/org', headers: fresh.headers });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ organization_id: fresh.organization_id, name: 'Acme' });
    expect(res.json().slug).toMatch(/^acme-/);
  });

  it('answers 401 without a key and 422 on a query string', async () => {
    expect((await ctx.app.inject({ method: 'GET', url: '/org' })).statusCode).toBe(401);
    expect((await api.get('/org?x=1')).statusCode).toBe(422);
  });
});

describe('PATCH /org', () => {
  it('changes name and slug and reports both as changes', async () => {
    const own = caller(ctx, (await createTestOrganization(ctx.db, 'Renamed')).api_key);
    const before = (await own.get('/org')).json();
    const res = await own.patch('/org', { name: 'Acme Inc', slug: 'acme-inc-renamed' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ name: 'Acme Inc', slug: 'acme-inc-renamed' });
    expect(lastWrite(writes)).toMatchObject({
      method: 'PATCH',
      route: '/org',
      details: {
        name: { from: before.name, to: 'Acme Inc' },
        slug: { from: before.slug, to: 'acme-inc-renamed' },
      },
    });
  });

  it('reports null details when nothing changed', async () => {
    const own = caller(ctx, (await createTestOrganization(ctx.db, 'Unchanged')).api_key);
    const res = await own.patch('/org', { name: 'Unchanged' });
    expect(res.statusCode).toBe(200);
    expect(lastWrite(writes).details).toBeNull();
  });

  it('refuses a slug another organization has with 409 CONFLICT', async () => {
    const holder = caller(ctx, (await createTestOrganization(ctx.db, 'Holder')).api_key);
    expect((await holder.patch('/org', { slug: 'acme-held' })).statusCode).toBe(200);
    const res = await caller(ctx, other.api_key).patch('/org', { slug: 'acme-held' });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({ code: 'CONFLICT', details: { field: 'slug' } });
  });

  it.each([
    [{ slug: 'Has Caps' }, 'slug'],
    [{ slug: '-leading' }, 'slug'],
    [{ slug: 'x'.repeat(64) }, 'slug'],
    [{ name: '' }, 'name'],
    [{ id: 'org_x' }, 'id'],
  ])('refuses %j with 422 on %s', async (payload, field) => {
    const res = await api.patch('/org', payload);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
  });

  it('needs org:write (org:read alone gets 403; a viewer gets 403 even with full access)', async () => {
    const reader = await createKeyWithScopes(ctx.db, org.organization_id, ['org:read']);
    expect((await caller(ctx, reader.apiKey).get('/org')).statusCode).toBe(200);
    expect((await caller(ctx, reader.apiKey).patch('/org', { name: 'x' })).statusCode).toBe(403);
    const viewer = await createKeyWithScopes(ctx.db, org.organization_id, [], 'viewer');
    expect((await caller(ctx, viewer.apiKey).patch('/org', { name: 'x' })).statusCode).toBe(403);
    const writer = await createKeyWithScopes(ctx.db, org.organization_id, ['org:write']);
    expect((await caller(ctx, writer.apiKey).get('/org')).statusCode).toBe(403);
  });
});
