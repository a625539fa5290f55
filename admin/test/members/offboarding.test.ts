import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { createAdminContext, type AdminTestContext } from '../../../test-support/admin-context.ts';
import { caller } from '../../../test-support/identity-context.ts';
import { joinWithRole, signUp, type ConsoleUser } from '../console-sessions/browser.ts';

let ctx: AdminTestContext;

beforeAll(async () => {
  ctx = await createAdminContext();
});
afterAll(() => ctx.close());

const unique = (label: string) => `${label}-${randomBytes(3).toString('hex')}`;

/** A service account `person` creates from their console session, and a key they mint on it (full access). */
async function mintFromConsole(person: ConsoleUser, role: 'developer' | 'viewer' = 'developer') {
  const account = await person.call('POST', '/org/service-accounts', { name: unique('ci'), role });
  expect(account.statusCode, account.body).toBe(201);
  const serviceAccountId = account.json().service_account_id as string;
  const key = await person.call('POST', `/org/service-accounts/${serviceAccountId}/api-keys`, {
    name: 'copied',
    scopes: [],
  });
  expect(key.statusCode, key.body).toBe(201);
  return {
    serviceAccountId,
    keyId: key.json().key_id as string,
    keyPrefix: key.json().key_prefix as string,
    apiKey: key.json().api_key as string,
  };
}

/** Whether `apiKey` may still write the catalog (a feature, then a plan granting it). */
async function writesCatalog(apiKey: string): Promise<number[]> {
  const api = caller(ctx, apiKey);
  const key = unique('f');
  const feature = await api.post('/org/features', { key, name: key, kind: 'flag' });
  const plan = await api.post('/org/plans', {
    key: unique('p'),
    name: 'plan',
    kind: 'catalog',
    grants: [{ feature: feature.statusCode === 201 ? key : 'missing', kind: 'flag' }],
  });
  return [feature.statusCode, plan.statusCode];
}

/** The audit entry of the latest PATCH /org/members/{member_id} on `memberId`, read as the admin reads the log. */
async function memberWriteEntry(admin: ConsoleUser, memberId: string) {
  const res = await admin.call(
    'GET',
    `/org/audit-events?method=PATCH&route=${encodeURIComponent('/org/members/{member_id}')}&params[member_id]=${memberId}&limit=1`,
  );
  expect(res.statusCode, res.body).toBe(200);
  return res.json().audit_events[0];
}

describe('offboarding: the keys a member minted', () => {
  it('removing a developer revokes the keys they minted from the console and with those keys, and only those', async () => {
    const admin = await signUp(ctx, 'offboard');
    const developer = await joinWithRole(ctx, admin, 'developer');
    const copied = await mintFromConsole(developer);
    // A key minted with the copied key: whoever held that one saw this one too.
    const chained = await caller(ctx, copied.apiKey).post(
      `/org/service-accounts/${copied.serviceAccountId}/api-keys`,
      { name: 'chained', scopes: [] },
    );
    expect(chained.statusCode, chained.body).toBe(201);
    // The admin's own key on the same account is not the developer's to take away.
    const adminKey = await admin.call('POST', `/org/service-accounts/${copied.serviceAccountId}/api-keys`, {
      name: 'production',
      scopes: [],
    });
    expect(adminKey.statusCode, adminKey.body).toBe(201);
    expect(await writesCatalog(copied.apiKey)).toEqual([201, 201]);

    const list = await admin.call('GET', `/org/service-accounts/${copied.serviceAccountId}/api-keys`);
    expect(list.statusCode, list.body).toBe(200);
    const byId = new Map(list.json().api_keys.map((key: { key_id: string }) => [key.key_id, key]));
    expect(byId.get(copied.keyId)).toMatchObject({
      minted_by: { member_id: developer.memberId, email: developer.email },
      minted_with_key_id: null,
    });
    expect(byId.get(chained.json().key_id)).toMatchObject({
      minted_by: { member_id: developer.memberId, email: developer.email },
      minted_with_key_id: copied.keyId,
    });
    expect(byId.get(adminKey.json().key_id)).toMatchObject({
      minted_by: { member_id: admin.memberId, email: admin.email },
    });

    // What the admin is shown before confirming: the developer's live keys, newest first.
    const minted = await admin.call('GET', `/org/members/${developer.memberId}/minted-keys`);
    expect(minted.statusCode, minted.body).toBe(200);
    expect(minted.json().api_keys.map((key: { key_id: string }) => key.key_id)).toEqual([
      chained.json().key_id,
      copied.keyId,
    ]);

    const removal = await admin.call('PATCH', `/org/members/${developer.memberId}`, { status: 'removed' });
    expect(removal.statusCode, removal.body).toBe(200);

    expect((await developer.call('GET', '/org/features')).statusCode).toBe(401);
    expect(await writesCatalog(copied.apiKey)).toEqual([401, 401]);
    expect(await writesCatalog(chained.json().api_key)).toEqual([401, 401]);
    expect(await writesCatalog(adminKey.json().api_key)).toEqual([201, 201]);

    const entry = await memberWriteEntry(admin, developer.memberId);
    expect(entry.details).toEqual({
      status: { from: 'active', to: 'removed' },
      revoke_minted_keys: true,
      revoked_keys: [
        { key_id: copied.keyId, key_prefix: copied.keyPrefix },
        { key_id: chained.json().key_id, key_prefix: chained.json().key_prefix },
      ],
      kept_keys: [],
    });
    const after = await admin.call('GET', `/org/members/${developer.memberId}/minted-keys`);
    expect(after.json()).toEqual({ api_keys: [], has_more: false });
  });

  it('demoting a developer revokes the keys they minted, even those their new role could still have made', async () => {
    const admin = await signUp(ctx, 'demote');
    const developer = await joinWithRole(ctx, admin, 'developer');
    const copied = await mintFromConsole(developer, 'viewer');
    const check = (apiKey: string) =>
      caller(ctx, apiKey)
        .get(`/org/members/${developer.memberId}`)
        .then((res) => res.statusCode);
    expect(await check(copied.apiKey)).toBe(200);

    const demotion = await admin.call('PATCH', `/org/members/${developer.memberId}`, { role: 'viewer' });
    expect(demotion.statusCode, demotion.body).toBe(200);
    expect(await check(copied.apiKey)).toBe(401);
    // The person stays, with the lower role: their session still reads.
    expect((await developer.call('GET', '/org/features')).statusCode).toBe(200);
    expect((await memberWriteEntry(admin, developer.memberId)).details).toEqual({
      role: { from: 'developer', to: 'viewer' },
      revoke_minted_keys: true,
      revoked_keys: [{ key_id: copied.keyId, key_prefix: copied.keyPrefix }],
      kept_keys: [],
    });
  });

  it('revoke_minted_keys: false keeps them working, and the audit entry says so and names them', async () => {
    const admin = await signUp(ctx, 'keep');
    const developer = await joinWithRole(ctx, admin, 'developer');
    const copied = await mintFromConsole(developer);

    const removal = await admin.call('PATCH', `/org/members/${developer.memberId}`, {
      status: 'removed',
      revoke_minted_keys: false,
    });
    expect(removal.statusCode, removal.body).toBe(200);
    expect((await developer.call('GET', '/org/features')).statusCode).toBe(401);
    expect(await writesCatalog(copied.apiKey)).toEqual([201, 201]);
    expect((await memberWriteEntry(admin, developer.memberId)).details).toEqual({
      status: { from: 'active', to: 'removed' },
      revoke_minted_keys: false,
      revoked_keys: [],
      kept_keys: [{ key_id: copied.keyId, key_prefix: copied.keyPrefix }],
    });
    const minted = await admin.call('GET', `/org/members/${developer.memberId}/minted-keys`);
    expect(minted.json().api_keys.map((key: { key_id: string }) => key.key_id)).toEqual([copied.keyId]);
  });

  it('refuses revoke_minted_keys on a write that neither removes nor changes a role (422), changing nothing', async () => {
    const admin = await signUp(ctx, 'flag');
    const developer = await joinWithRole(ctx, admin, 'developer');
    const copied = await mintFromConsole(developer);
    const res = await admin.call('PATCH', `/org/members/${developer.memberId}`, {
      status: 'suspended',
      revoke_minted_keys: true,
    });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'revoke_minted_keys', value: true },
    });
    expect((await admin.call('GET', `/org/members/${developer.memberId}`)).json().status).toBe('active');
    expect(await writesCatalog(copied.apiKey)).toEqual([201, 201]);
  });

  it('a suspension or a promotion revokes nothing; a retried removal is a no-op', async () => {
    const admin = await signUp(ctx, 'other');
    const viewer = await joinWithRole(ctx, admin, 'viewer');
    const promoted = await admin.call('PATCH', `/org/members/${viewer.memberId}`, {
      role: 'developer',
      revoke_minted_keys: true,
    });
    expect(promoted.statusCode, promoted.body).toBe(200);
    expect((await memberWriteEntry(admin, viewer.memberId)).details).toEqual({
      role: { from: 'viewer', to: 'developer' },
    });
    const copied = await mintFromConsole(viewer);
    const suspension = await admin.call('PATCH', `/org/members/${viewer.memberId}`, { status: 'suspended' });
    expect(suspension.statusCode, suspension.body).toBe(200);
    expect(await writesCatalog(copied.apiKey)).toEqual([201, 201]);
    const removal = { status: 'removed', revoke_minted_keys: true };
    expect((await admin.call('PATCH', `/org/members/${viewer.memberId}`, removal)).statusCode).toBe(200);
    expect(await writesCatalog(copied.apiKey)).toEqual([401, 401]);
    const retry = await admin.call('PATCH', `/org/members/${viewer.memberId}`, removal);
    expect(retry.statusCode, retry.body).toBe(200);
  });

  it('records no minter for a key minted with a key that has none (provisioning), and 404 for an unknown member', async () => {
    const admin = await signUp(ctx, 'none');
    const account = await admin.call('POST', '/org/service-accounts', { name: 'bootstrap', role: 'admin' });
    const accountId = account.json().service_account_id as string;
    const first = await admin.call('POST', `/org/service-accounts/${accountId}/api-keys`, { scopes: [] });
    // An old key (from before minters were recorded) is one with no minter: make the admin's key one.
    await ctx.ownerDb
      .updateTable('api_keys')
      .set({ minted_by_member_id: null })
      .where('id', '=', first.json().key_id)
      .execute();
    const second = await caller(ctx, first.json().api_key).post(
      `/org/service-accounts/${accountId}/api-keys`,
      {
        scopes: ['check'],
      },
    );
    expect(second.statusCode, second.body).toBe(201);
    expect(second.json()).toMatchObject({ minted_by: null, minted_with_key_id: first.json().key_id });
    const missing = await admin.call('GET', '/org/members/mem_nobody/minted-keys');
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.code).toBe('NOT_FOUND');
  });
});
