import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AdminTestContext, type TestOrganization } from '../../../test-support/admin-context.ts';
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

describe('service accounts', () => {
  it('creates one (a member of kind service_account); details name what was created', async () => {
    const res = await api.post('/org/service-accounts', { name: 'Backend', role: 'developer' });
    expect(res.statusCode).toBe(201);
    const account = res.json();
    expect(account).toMatchObject({ name: 'Backend', role: 'developer', status: 'active' });
    expect(account.service_account_id).toMatch(/^sa_/);
    expect(lastWrite(writes)).toMatchObject({
      route: '/org/service-accounts',
      details: {
        service_account_id: account.service_account_id,
        member_id: account.member_id,
        name: 'Backend',
        role: 'developer',
      },
    });
    const member = await api.get(`/org/members/${account.member_id}`);
    expect(member.json()).toMatchObject({ kind: 'service_account', role: 'developer', name: 'Backend' });
  });

  it('refuses invalid bodies with 422', async () => {
    expect((await api.post('/org/service-accounts', { name: '', role: 'viewer' })).statusCode).toBe(422);
    expect((await api.post('/org/service-accounts', { name: 'x', role: 'root' })).statusCode).toBe(422);
    expect((await api.post('/org/service-accounts', { name: 'x' })).statusCode).toBe(422);
  });

  it('lists, reads and renames (name as a change; null when unchanged)', async () => {
    const account = (await api.post('/org/service-accounts', { name: 'Cron', role: 'viewer' })).json();
    const list = await api.get('/org/service-accounts?limit=1');
    expect(list.json()).toMatchObject({
      service_accounts: [{ service_account_id: account.service_account_id }],
      has_more: true,
    });
    expect((await api.get(`/org/service-accounts/${account.service_account_id}`)).json().name).toBe('Cron');
    const renamed = await api.patch(`/org/service-accounts/${account.service_account_id}`, {
      name: 'Nightly',
    });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json().name).toBe('Nightly');
    expect(lastWrite(writes).details).toEqual({ name: { from: 'Cron', to: 'Nightly' } });
    await api.patch(`/org/service-accounts/${account.service_account_id}`, { name: 'Nightly' });
    expect(lastWrite(writes).details).toBeNull();
    expect(
      (await api.patch(`/org/service-accounts/${account.service_account_id}`, { role: 'admin' })).statusCode,
    ).toBe(422);
  });

  it('moves updated_at with a change to the member it is, and refuses changes once removed (409)', async () => {
    const account = (await api.post('/org/service-accounts', { name: 'Shortlived', role: 'viewer' })).json();
    const url = `/org/service-accounts/${account.service_account_id}`;
    await new Promise((resolve) => setTimeout(resolve, 5));
    const suspended = await api.patch(`/org/members/${account.member_id}`, { status: 'suspended' });
    expect(suspended.statusCode).toBe(200);
    const read = (await api.get(url)).json();
    expect(read.status).toBe('suspended');
    expect(read.updated_at).toBe(suspended.json().updated_at);
    expect(Date.parse(read.updated_at)).toBeGreaterThan(Date.parse(account.updated_at));

    expect((await api.patch(`/org/members/${account.member_id}`, { status: 'removed' })).statusCode).toBe(
      200,
    );
    const renamed = await api.patch(url, { name: 'Back again' });
    expect(renamed.statusCode).toBe(409);
    expect(renamed.json().error).toMatchObject({
      code: 'CONFLICT',
      details: { field: 'status', value: 'removed' },
    });
    expect((await api.get(url)).json().name).toBe('Shortlived');
    // Changing nothing is still no change, as for members.
    expect((await api.patch(url, { name: 'Shortlived' })).statusCode).toBe(200);
  });

  it("answers 404 for unknown ids and for another organization's account", async () => {
    expect((await api.get('/org/service-accounts/sa_nope')).statusCode).toBe(404);
    expect((await api.get(`/org/service-accounts/${other.service_account_id}`)).statusCode).toBe(404);
    expect(
      (await api.patch(`/org/service-accounts/${other.service_account_id}`, { name: 'x' })).statusCode,
    ).toBe(404);
    expect(
      (await api.post(`/org/service-accounts/${other.service_account_id}/api-keys`, {})).statusCode,
    ).toBe(404);
    expect((await api.get(`/org/service-accounts/${other.service_account_id}/api-keys`)).statusCode).toBe(
      404,
    );
  });
});

describe('API keys', () => {
  it('creates a key: plaintext once, default scope check, details key_id, key_prefix, name', async () => {
    const account = (await api.post('/org/service-accounts', { name: 'Keys', role: 'admin' })).json();
    const res = await api.post(`/org/service-accounts/${account.service_account_id}/api-keys`, {
      name: 'prod',
    });
    expect(res.statusCode).toBe(201);
    // Shown once: no cache on the way may keep it.
    expect(res.headers['cache-control']).toBe('no-store');
    const key = res.json();
    expect(key.api_key).toMatch(/^svc-mk-1-/);
    expect(key).toMatchObject({ name: 'prod', scopes: ['check'], revoked_at: null });
    expect(key.key_prefix).toBe(key.api_key.slice(0, 17));
    const write = lastWrite(writes);
    expect(write).toMatchObject({
      details: { key_id: key.key_id, key_prefix: key.key_prefix, name: 'prod' },
      authChanged: true,
    });
    expect(JSON.stringify(write.details)).not.toContain(key.api_key);

    const list = await api.get(`/org/service-accounts/${account.service_account_id}/api-keys`);
    expect(list.statusCode).toBe(200);
    expect(list.json().api_keys).toEqual([
      expect.objectContaining({ key_id: key.key_id, key_prefix: key.key_prefix }),
    ]);
    expect(JSON.stringify(list.json())).not.toContain(key.api_key);

    // A check-only key is refused on /org reads.
    expect((await caller(ctx, key.api_key).get('/org')).statusCode).toBe(403);
  });

  it('creates a key with the defaults when the POST has no body', async () => {
    const res = await ctx.app.inject({
      method: 'POST',
      url: `/org/service-accounts/${org.service_account_id}/api-keys`,
      headers: org.headers,
    });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ name: '', scopes: ['check'] });
  });

  it('scopes: [] is full access; explicit scopes are kept; unknown scopes are 422', async () => {
    const account = (await api.post('/org/service-accounts', { name: 'Scoped', role: 'admin' })).json();
    const url = `/org/service-accounts/${account.service_account_id}/api-keys`;
    const full = (await api.post(url, { scopes: [] })).json();
    expect(full.scopes).toEqual([]);
    expect((await caller(ctx, full.api_key).patch('/org', { name: 'Acme' })).statusCode).toBe(200);
    const reader = (await api.post(url, { scopes: ['org:read', 'catalog:read'] })).json();
    expect(reader.scopes).toEqual(['org:read', 'catalog:read']);
    expect((await caller(ctx, reader.api_key).get('/org')).statusCode).toBe(200);
    expect((await caller(ctx, reader.api_key).patch('/org', { name: 'x' })).statusCode).toBe(403);
    expect((await api.post(url, { scopes: ['everything'] })).statusCode).toBe(422);
    expect((await api.post(url, { scopes: ['check', 'check'] })).statusCode).toBe(422);
    expect((await api.post(url, { name: 'x'.repeat(256) })).statusCode).toBe(422);
  });

  it('a revoked key gets 401 on the next request; revoking again is a no-op; unknown key 404', async () => {
    const account = (await api.post('/org/service-accounts', { name: 'Revoke', role: 'admin' })).json();
    const url = `/org/service-accounts/${account.service_account_id}/api-keys`;
    const key = (await api.post(url, { scopes: [] })).json();
    const keyApi = caller(ctx, key.api_key);
    expect((await keyApi.get('/org')).statusCode).toBe(200);
    const revoked = await api.delete(`${url}/${key.key_id}`);
    expect(revoked.statusCode).toBe(204);
    expect(lastWrite(writes)).toMatchObject({ method: 'DELETE', details: null, authChanged: true });
    const next = await keyApi.get('/org');
    expect(next.statusCode).toBe(401);
    expect(next.json().error.code).toBe('UNAUTHENTICATED');
    expect((await api.delete(`${url}/${key.key_id}`)).statusCode).toBe(204);
    // A no-op (nothing audited as a change) that still publishes the keys: the first revoke may not have yet.
    expect(lastWrite(writes)).toMatchObject({ details: null, authChanged: true });
    expect((await api.delete(`${url}/key_nope`)).statusCode).toBe(404);
    const list = (await api.get(url)).json();
    expect(list.api_keys[0].revoked_at).not.toBeNull();
  });

  it('a key can revoke itself, and is refused right after', async () => {
    const key = await createKeyWithScopes(ctx.db, org.organization_id, ['org:write']);
    const self = caller(ctx, key.apiKey);
    expect(
      (await self.delete(`/org/service-accounts/${key.serviceAccountId}/api-keys/${key.keyId}`)).statusCode,
    ).toBe(204);
    expect(
      (await self.delete(`/org/service-accounts/${key.serviceAccountId}/api-keys/${key.keyId}`)).statusCode,
    ).toBe(401);
  });

  it('refuses new keys on a suspended service account (409)', async () => {
    const account = (await api.post('/org/service-accounts', { name: 'Paused', role: 'viewer' })).json();
    await api.patch(`/org/members/${account.member_id}`, { status: 'suspended' });
    expect(
      (await api.post(`/org/service-accounts/${account.service_account_id}/api-keys`, {})).statusCode,
    ).toBe(409);
  });
});

describe('roles on service accounts and keys', () => {
  it('a developer may manage developer and viewer accounts, not admin ones (403)', async () => {
    const dev = caller(ctx, (await createKeyWithScopes(ctx.db, org.organization_id, [], 'developer')).apiKey);
    expect((await dev.post('/org/service-accounts', { name: 'Dev made', role: 'admin' })).statusCode).toBe(
      403,
    );
    const made = await dev.post('/org/service-accounts', { name: 'Dev made', role: 'developer' });
    expect(made.statusCode).toBe(201);
    const key = await dev.post(`/org/service-accounts/${made.json().service_account_id}/api-keys`, {
      scopes: [],
    });
    expect(key.statusCode).toBe(201);
    expect(
      (await dev.post(`/org/service-accounts/${org.service_account_id}/api-keys`, { scopes: [] })).statusCode,
    ).toBe(403);
    expect(
      (await dev.patch(`/org/service-accounts/${org.service_account_id}`, { name: 'pwned' })).statusCode,
    ).toBe(403);
    const adminKeys = (await api.get(`/org/service-accounts/${org.service_account_id}/api-keys`)).json();
    expect(
      (
        await dev.delete(
          `/org/service-accounts/${org.service_account_id}/api-keys/${adminKeys.api_keys[0].key_id}`,
        )
      ).statusCode,
    ).toBe(403);
    expect((await dev.get(`/org/service-accounts/${org.service_account_id}/api-keys`)).statusCode).toBe(200);
  });

  it('a viewer reads but cannot write (403) even with a full-access key', async () => {
    const viewer = caller(ctx, (await createKeyWithScopes(ctx.db, org.organization_id, [], 'viewer')).apiKey);
    expect((await viewer.get('/org/service-accounts')).statusCode).toBe(200);
    expect((await viewer.post('/org/service-accounts', { name: 'v', role: 'viewer' })).statusCode).toBe(403);
  });
});

describe('rotation with a restricted key', () => {
  it('a CI key rotates itself with its own scopes, and can neither widen nor touch other accounts', async () => {
    const ci = await createKeyWithScopes(ctx.db, org.organization_id, ['org:write', 'catalog:write']);
    const ciApi = caller(ctx, ci.apiKey);
    const url = `/org/service-accounts/${ci.serviceAccountId}/api-keys`;
    const next = await ciApi.post(url, { name: 'ci next', scopes: ['catalog:write', 'org:write'] });
    expect(next.statusCode).toBe(201);
    const nextApi = caller(ctx, next.json().api_key);
    expect((await nextApi.delete(`${url}/${ci.keyId}`)).statusCode).toBe(204);
    expect((await ciApi.post(url, { scopes: ['org:write'] })).statusCode).toBe(401);

    const widened = await nextApi.post(url, { scopes: ['catalog:write', 'catalog:read'] });
    expect(widened.statusCode).toBe(403);
    expect(widened.json().error.details).toEqual({ field: 'scopes', value: ['catalog:read'] });
    const elsewhere = await nextApi.post(`/org/service-accounts/${org.service_account_id}/api-keys`, {
      scopes: ['catalog:write'],
    });
    expect(elsewhere.statusCode).toBe(403);
    expect(elsewhere.json().error.details).toEqual({
      field: 'service_account_id',
      value: org.service_account_id,
    });
    const orgKeys = (await api.get(`/org/service-accounts/${org.service_account_id}/api-keys`)).json();
    expect(
      (
        await nextApi.delete(
          `/org/service-accounts/${org.service_account_id}/api-keys/${orgKeys.api_keys[0].key_id}`,
        )
      ).statusCode,
    ).toBe(403);
    expect((await api.get('/org')).statusCode).toBe(200);
  });
});
