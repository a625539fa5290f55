import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
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

/** An admin caller of an organization of its own, for cases whose members must be theirs alone. */
const ownCaller = async () => caller(ctx, (await createTestOrganization(ctx.db, 'Members org')).api_key);

describe('POST /org/members', () => {
  it('creates a member with email and role; details name member_id and role', async () => {
    const api = await ownCaller();
    const res = await api.post('/org/members', { email: 'Ada@Example.com', role: 'developer', name: 'Ada' });
    expect(res.statusCode).toBe(201);
    const member = res.json();
    expect(member).toMatchObject({
      kind: 'user',
      email: 'ada@example.com',
      role: 'developer',
      status: 'active',
      name: 'Ada',
    });
    expect(member.member_id).toMatch(/^mem_/);
    expect(lastWrite(writes)).toMatchObject({
      route: '/org/members',
      details: { member_id: member.member_id, role: 'developer' },
      authChanged: true,
    });
  });

  it('refuses the same email twice with 409', async () => {
    const api = await ownCaller();
    expect((await api.post('/org/members', { email: 'Ada@Example.com', role: 'developer' })).statusCode).toBe(
      201,
    );
    const res = await api.post('/org/members', { email: 'ada@example.com', role: 'viewer' });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({ code: 'CONFLICT', details: { field: 'email' } });
  });

  it.each([
    [{ role: 'admin' }, 'email'],
    [{ email: 'not-an-email', role: 'admin' }, 'email'],
    [{ email: 'b@example.com', role: 'owner' }, 'role'],
    [{ email: 'b@example.com', role: 'admin', status: 'active' }, 'status'],
  ])('refuses %j with 422 on %s', async (payload, field) => {
    const res = await api.post('/org/members', payload);
    expect(res.statusCode).toBe(422);
    expect(res.json().error.details.field).toBe(field);
  });
});

describe('GET /org/members', () => {
  it('lists members newest first with cursor pagination and filters', async () => {
    const api = await ownCaller();
    await api.post('/org/members', { email: 'ada@example.com', role: 'developer' });
    await api.post('/org/members', { email: 'grace@example.com', role: 'viewer' });
    const first = await api.get('/org/members?limit=1');
    expect(first.statusCode).toBe(200);
    expect(first.json().members).toHaveLength(1);
    expect(first.json().members[0].email).toBe('grace@example.com');
    expect(first.json().has_more).toBe(true);
    const next = await api.get(`/org/members?limit=100&starting_after=${first.json().members[0].member_id}`);
    expect(next.json().members.map((m: { email: string | null }) => m.email)).toContain('ada@example.com');
    const users = await api.get('/org/members?kind=user');
    expect(users.json().members.every((m: { kind: string }) => m.kind === 'user')).toBe(true);
    expect((await api.get('/org/members?colour=blue')).statusCode).toBe(422);
  });

  it('refuses a starting_after that names nothing in the list with 422 (members, service accounts, keys, invites, deliveries)', async () => {
    const foreignMember = other.member_id;
    for (const url of [
      '/org/members?starting_after=x',
      '/org/members?starting_after=mem_zzzzzzzzzzzzzzzzzzzzzzzzzz',
      `/org/members?starting_after=${foreignMember}`,
      '/org/service-accounts?starting_after=sa_zzzzzzzzzzzzzzzzzzzzzzzzzz',
      `/org/service-accounts?starting_after=${other.service_account_id}`,
      `/org/service-accounts/${org.service_account_id}/api-keys?starting_after=key_zzzzzzzzzzzzzzzzzzzzzzzzzz`,
      '/org/invites?starting_after=inv_zzzzzzzzzzzzzzzzzzzzzzzzzz',
      '/org/webhook/deliveries?starting_after=whd_zzzzzzzzzzzzzzzzzzzzzzzzzz',
    ]) {
      const res = await api.get(url);
      expect(res.statusCode, url).toBe(422);
      expect(res.json().error, url).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: { field: 'starting_after' },
      });
    }
  });

  it("reads one member; 404 for an unknown or another organization's member", async () => {
    const res = await api.get(`/org/members/${org.member_id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ member_id: org.member_id, kind: 'service_account', role: 'admin' });
    expect((await api.get('/org/members/mem_nope')).statusCode).toBe(404);
    expect((await api.get(`/org/members/${other.member_id}`)).statusCode).toBe(404);
    expect(
      (await caller(ctx, other.api_key).patch(`/org/members/${org.member_id}`, { role: 'viewer' }))
        .statusCode,
    ).toBe(404);
  });
});

describe('PATCH /org/members/{member_id}', () => {
  it('changes role and status and reports them as changes', async () => {
    const created = (await api.post('/org/members', { email: 'linus@example.com', role: 'viewer' })).json();
    const res = await api.patch(`/org/members/${created.member_id}`, {
      role: 'developer',
      status: 'suspended',
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ role: 'developer', status: 'suspended' });
    expect(lastWrite(writes)).toMatchObject({
      route: '/org/members/:member_id',
      details: { role: { from: 'viewer', to: 'developer' }, status: { from: 'active', to: 'suspended' } },
      authChanged: true,
    });
    const again = await api.patch(`/org/members/${created.member_id}`, { role: 'developer' });
    expect(again.statusCode).toBe(200);
    // Nothing changed, yet the keys are published again: an identical write before it may not have been yet.
    expect(lastWrite(writes)).toMatchObject({ details: null, authChanged: true });
  });

  it('makes a removed member final (409 on any later change)', async () => {
    const created = (await api.post('/org/members', { email: 'ken@example.com', role: 'viewer' })).json();
    expect((await api.patch(`/org/members/${created.member_id}`, { status: 'removed' })).statusCode).toBe(
      200,
    );
    const res = await api.patch(`/org/members/${created.member_id}`, { status: 'active' });
    expect(res.statusCode).toBe(409);
  });

  it('refuses an unknown status or field with 422 and an unknown member with 404', async () => {
    expect((await api.patch(`/org/members/${org.member_id}`, { status: 'gone' })).statusCode).toBe(422);
    expect((await api.patch(`/org/members/${org.member_id}`, { email: 'x@example.com' })).statusCode).toBe(
      422,
    );
    expect((await api.patch('/org/members/mem_nope', { role: 'viewer' })).statusCode).toBe(404);
  });

  it('suspending a member makes its keys fail with 401 on the next request; reactivating restores them', async () => {
    const key = await createKeyWithScopes(ctx.db, org.organization_id, [], 'developer');
    const dev = caller(ctx, key.apiKey);
    expect((await dev.get('/org')).statusCode).toBe(200);
    expect((await api.patch(`/org/members/${key.memberId}`, { status: 'suspended' })).statusCode).toBe(200);
    expect((await dev.get('/org')).statusCode).toBe(401);
    expect((await api.patch(`/org/members/${key.memberId}`, { status: 'active' })).statusCode).toBe(200);
    expect((await dev.get('/org')).statusCode).toBe(200);
  });

  it('removing a member revokes its keys for good', async () => {
    const key = await createKeyWithScopes(ctx.db, org.organization_id, [], 'viewer');
    expect((await api.patch(`/org/members/${key.memberId}`, { status: 'removed' })).statusCode).toBe(200);
    expect((await caller(ctx, key.apiKey).get('/org')).statusCode).toBe(401);
    const row = await ctx.db
      .selectFrom('api_keys')
      .select('revoked_at')
      .where('id', '=', key.keyId)
      .executeTakeFirstOrThrow();
    expect(row.revoked_at).not.toBeNull();
  });

  it('bumps the organization auth_version on role and status changes', async () => {
    const read = () =>
      ctx.db
        .selectFrom('organizations')
        .select('auth_version')
        .where('id', '=', org.organization_id)
        .executeTakeFirstOrThrow();
    const before = (await read()).auth_version;
    const created = (await api.post('/org/members', { email: 'barbara@example.com', role: 'viewer' })).json();
    await api.patch(`/org/members/${created.member_id}`, { role: 'developer' });
    expect((await read()).auth_version).toBeGreaterThanOrEqual(before + 2);
  });
});

describe('the last active admin', () => {
  it('cannot be demoted, suspended or removed (409 CONFLICT); can once another admin exists', async () => {
    const solo = await createTestOrganization(ctx.db, 'Solo');
    const soloApi = caller(ctx, solo.api_key);
    for (const change of [{ role: 'developer' }, { status: 'suspended' }, { status: 'removed' }]) {
      const res = await soloApi.patch(`/org/members/${solo.member_id}`, change);
      expect(res.statusCode).toBe(409);
      expect(res.json().error.code).toBe('CONFLICT');
    }
    // A suspended admin does not count as an admin.
    const second = (
      await soloApi.post('/org/members', { email: 'second@example.com', role: 'admin' })
    ).json();
    expect(
      (await soloApi.patch(`/org/members/${second.member_id}`, { status: 'suspended' })).statusCode,
    ).toBe(200);
    expect((await soloApi.patch(`/org/members/${solo.member_id}`, { role: 'viewer' })).statusCode).toBe(409);
    expect((await soloApi.patch(`/org/members/${second.member_id}`, { status: 'active' })).statusCode).toBe(
      200,
    );
    const demoted = await soloApi.patch(`/org/members/${solo.member_id}`, { role: 'developer' });
    expect(demoted.statusCode).toBe(200);
    expect(demoted.json().role).toBe('developer');
  });
});

describe('roles on member routes', () => {
  it('gives a developer key with full scopes 403 on role, status and member creation', async () => {
    const dev = await createKeyWithScopes(ctx.db, org.organization_id, [], 'developer');
    const devApi = caller(ctx, dev.apiKey);
    expect((await devApi.get('/org/members')).statusCode).toBe(200);
    const target = (await api.post('/org/members', { email: 'target@example.com', role: 'viewer' })).json();
    const role = await devApi.patch(`/org/members/${target.member_id}`, { role: 'admin' });
    expect(role.statusCode).toBe(403);
    expect(role.json().error.code).toBe('FORBIDDEN');
    expect((await devApi.patch(`/org/members/${dev.memberId}`, { role: 'admin' })).statusCode).toBe(403);
    expect((await devApi.patch(`/org/members/${target.member_id}`, { status: 'suspended' })).statusCode).toBe(
      403,
    );
    expect(
      (await devApi.post('/org/members', { email: 'dev-made@example.com', role: 'admin' })).statusCode,
    ).toBe(403);
  });

  it('gives an admin key without org:write 403, and with only org:write 403 on reads', async () => {
    const reader = await createKeyWithScopes(ctx.db, org.organization_id, ['org:read']);
    expect(
      (await caller(ctx, reader.apiKey).patch(`/org/members/${org.member_id}`, { role: 'admin' })).statusCode,
    ).toBe(403);
    const writer = await createKeyWithScopes(ctx.db, org.organization_id, ['org:write']);
    expect((await caller(ctx, writer.apiKey).get('/org/members')).statusCode).toBe(403);
    // A viewer's session reads the catalog and subscribers, which an org:write-only key cannot.
    const refused = await caller(ctx, writer.apiKey).post('/org/members', {
      email: 'w@example.com',
      role: 'viewer',
    });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatchObject({
      type: 'permission_error',
      details: { field: 'role', value: 'viewer' },
    });
    expect(refused.json().error.message).toContain('catalog:read');
  });

  it('lets an admin key grant a role only when it holds every scope of that role', async () => {
    const viewerRights = await createKeyWithScopes(ctx.db, org.organization_id, [
      'check',
      'catalog:read',
      'subscribers:read',
      'org:read',
      'org:write',
    ]);
    const keyApi = caller(ctx, viewerRights.apiKey);
    const viewer = await keyApi.post('/org/members', { email: 'vr@example.com', role: 'viewer' });
    expect(viewer.statusCode).toBe(201);
    expect(
      (await keyApi.post('/org/members', { email: 'dr@example.com', role: 'developer' })).statusCode,
    ).toBe(403);
    expect(
      (await keyApi.patch(`/org/members/${viewer.json().member_id}`, { role: 'developer' })).statusCode,
    ).toBe(403);
    const developer = (await api.post('/org/members', { email: 'dd@example.com', role: 'developer' })).json();
    // Lowering a role or suspending grants nothing.
    expect((await keyApi.patch(`/org/members/${developer.member_id}`, { role: 'viewer' })).statusCode).toBe(
      200,
    );
    expect(
      (await keyApi.patch(`/org/members/${developer.member_id}`, { status: 'suspended' })).statusCode,
    ).toBe(200);
  });

  it('treats making a suspended member active as granting its role again', async () => {
    const admin = (await api.post('/org/members', { email: 'sleeper@example.com', role: 'admin' })).json();
    expect((await api.patch(`/org/members/${admin.member_id}`, { status: 'suspended' })).statusCode).toBe(
      200,
    );
    const writer = caller(
      ctx,
      (await createKeyWithScopes(ctx.db, org.organization_id, ['org:write'])).apiKey,
    );
    const res = await writer.patch(`/org/members/${admin.member_id}`, { status: 'active' });
    expect(res.statusCode).toBe(403);
    expect(res.json().error.details).toEqual({ field: 'role', value: 'admin' });
    expect((await api.get(`/org/members/${admin.member_id}`)).json().status).toBe('suspended');
    expect((await api.patch(`/org/members/${admin.member_id}`, { status: 'active' })).statusCode).toBe(200);
  });
});
