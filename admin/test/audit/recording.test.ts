import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyPrefixOf } from '@ent/common/auth/api-key';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { TEST_APP_ROLE } from '../../../test-support/databases.ts';
import { auditLog } from './log.ts';

/** The audit entry of every write family: route, service, params and the details SPEC.md promises. */
let ctx: AdminTestContext;
let org: TestOrganization;
let other: TestOrganization;
const secrets: string[] = [];
/** Every plaintext key the cases of feature writes create: none may appear anywhere in the log. */
const plaintextKeys: string[] = [];

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Walkthrough');
  secrets.push(org.api_key);
  other = await createTestOrganization(ctx.db, 'Other org');
  plaintextKeys.push(org.api_key, other.api_key);
  // Features every case may grant or override; each case makes the plans, subscribers and the rest it needs.
  await feature('sso', 'flag');
  await feature('seats', 'limit');
});
afterAll(() => ctx.close());

const { inject, list, entryFor, countRows, whileLocked, uniqueKey, createFeature } = auditLog(() => ({
  ctx,
  org,
}));

/** The app's role may not insert into `table` of the log (as a log refusing writes), then may again. */
const refuseInserts = (table: string) =>
  sql`REVOKE INSERT ON ${sql.table(table)} FROM ${sql.id(TEST_APP_ROLE)}`.execute(ctx.ownerDb);
const allowInserts = (table: string) =>
  sql`GRANT INSERT ON ${sql.table(table)} TO ${sql.id(TEST_APP_ROLE)}`.execute(ctx.ownerDb);

interface Entry {
  id: string;
  service: string;
  method: string;
  route: string;
  params: Record<string, string>;
  outcome: string;
  status: number | null;
  details: Record<string, unknown> | null;
  actor: { member_id: string; key_prefix: string };
}

/** Anything in a response body that must never reach the log: keys, webhook secrets, invite links and tokens. */
function collectSecrets(value: unknown, field = ''): void {
  if (typeof value === 'string') {
    if (field.endsWith('_prefix')) return;
    if (
      /^svc-mk-1-.{20,}/.test(value) ||
      /^whsec_.{20,}/.test(value) ||
      /token|link/i.test(field) ||
      /token=|\/invites?\//.test(value)
    ) {
      secrets.push(value);
    }
  } else if (Array.isArray(value)) value.forEach((item) => collectSecrets(item, field));
  else if (value && typeof value === 'object')
    for (const [k, v] of Object.entries(value)) collectSecrets(v, k);
}

async function call(
  method: 'POST' | 'PATCH' | 'PUT' | 'DELETE' | 'GET',
  url: string,
  payload?: object,
  headers = org.headers,
) {
  const res = await ctx.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload }) });
  if (res.body) collectSecrets(res.json());
  const requestId = res.headers['x-request-id'] as string;
  const audit = await ctx.app.inject({
    method: 'GET',
    url: `/org/audit-events?request_id=${requestId}`,
    headers: org.headers,
  });
  const entries = audit.json().audit_events as Entry[];
  return { res, body: res.body ? res.json() : null, entry: entries[0], entries };
}

const feature = (key: string, kind: 'flag' | 'limit') =>
  call('POST', '/org/features', { key, name: key, kind });

describe('catalog: plans', () => {
  it('create names key, name, kind and grants', async () => {
    const { res, entry } = await call('POST', '/org/plans', {
      key: 'pro',
      name: 'Pro',
      kind: 'catalog',
      grants: [
        { feature: 'sso', kind: 'flag' },
        { feature: 'seats', kind: 'limit', limit: 5 },
      ],
    });
    expect(res.statusCode).toBe(201);
    expect(entry).toMatchObject({
      service: 'api',
      method: 'POST',
      route: '/org/plans',
      params: {},
      outcome: 'responded',
      status: 201,
    });
    expect(entry!.details).toMatchObject({ key: 'pro', name: 'Pro', kind: 'catalog' });
    expect(entry!.details!.grants).toBeTruthy();
  });

  it('change of grants is keyed by feature with null sides for added and removed', async () => {
    await call('POST', '/org/plans', {
      key: 'pro-change',
      name: 'Pro',
      kind: 'catalog',
      grants: [
        { feature: 'sso', kind: 'flag' },
        { feature: 'seats', kind: 'limit', limit: 5 },
      ],
    });
    const { res, entry } = await call('PATCH', '/org/plans/pro-change', {
      name: 'Pro 2',
      grants: [{ feature: 'seats', kind: 'limit', limit: null }],
    });
    expect(res.statusCode).toBe(200);
    expect(entry).toMatchObject({ route: '/org/plans/{key}', params: { key: 'pro-change' }, status: 200 });
    expect(entry!.details).toEqual({
      name: { from: 'Pro', to: 'Pro 2' },
      grants: {
        seats: { from: { kind: 'limit', limit: 5 }, to: { kind: 'limit', limit: null } },
        sso: { from: { kind: 'flag' }, to: null },
      },
    });
    const same = await call('PATCH', '/org/plans/pro-change', { name: 'Pro 2' });
    expect(same.entry).toMatchObject({ status: 200, details: null });
  });

  it('archive and unarchive report archived as a change, and nothing when already so', async () => {
    await call('POST', '/org/plans', { key: 'pro-archive', name: 'Pro', kind: 'catalog' });
    const archive = await call('POST', '/org/plans/pro-archive/archive');
    expect(archive.entry).toMatchObject({
      route: '/org/plans/{key}/archive',
      params: { key: 'pro-archive' },
      details: { archived: { from: false, to: true } },
    });
    expect((await call('POST', '/org/plans/pro-archive/archive')).entry!.details).toBeNull();
    const unarchive = await call('POST', '/org/plans/pro-archive/unarchive');
    expect(unarchive.entry!.details).toEqual({ archived: { from: true, to: false } });
  });

  it('delete has details null', async () => {
    await call('POST', '/org/plans', { key: 'temp', name: 'Temp', kind: 'custom' });
    const { res, entry } = await call('DELETE', '/org/plans/temp');
    expect(res.statusCode).toBe(204);
    expect(entry).toMatchObject({ method: 'DELETE', route: '/org/plans/{key}', status: 204, details: null });
  });
});

describe('subscribers, subscriptions, overrides', () => {
  it('subscriber create and rename', async () => {
    const created = await call('POST', '/org/subscribers', { subscriber_id: 'alice', name: 'Alice' });
    expect(created.entry).toMatchObject({
      route: '/org/subscribers',
      status: 201,
      details: { subscriber_id: 'alice', name: 'Alice' },
    });
    const renamed = await call('PATCH', '/org/subscribers/alice', { name: 'Alice B' });
    expect(renamed.entry).toMatchObject({
      route: '/org/subscribers/{subscriber_id}',
      params: { subscriber_id: 'alice' },
      details: { name: { from: 'Alice', to: 'Alice B' } },
    });
  });

  it('subscription create, change and cancel', async () => {
    await call('POST', '/org/plans', { key: 'sub-pro', name: 'Pro', kind: 'catalog' });
    await call('POST', '/org/plans', { key: 'team', name: 'Team', kind: 'catalog' });
    await call('POST', '/org/subscribers', { subscriber_id: 'bob' });
    const created = await call('POST', '/org/subscribers/bob/subscriptions', { plan_id: 'sub-pro' });
    expect(created.res.statusCode).toBe(201);
    const first = created.body.subscription_id as string;
    expect(created.entry).toMatchObject({
      route: '/org/subscribers/{subscriber_id}/subscriptions',
      params: { subscriber_id: 'bob' },
      details: { subscription_id: first, plan_id: 'sub-pro' },
    });
    const changed = await call('POST', '/org/subscribers/bob/subscriptions/change', { plan_id: 'team' });
    expect(changed.res.statusCode).toBe(201);
    const second = changed.body.subscription_id as string;
    expect(changed.entry).toMatchObject({
      route: '/org/subscribers/{subscriber_id}/subscriptions/change',
      details: {
        subscription_id: second,
        canceled_subscription_id: first,
        plan_id: { from: 'sub-pro', to: 'team' },
      },
    });
    const canceled = await call('POST', `/org/subscribers/bob/subscriptions/${second}/cancel`);
    expect(canceled.entry).toMatchObject({
      route: '/org/subscribers/{subscriber_id}/subscriptions/{subscription_id}/cancel',
      params: { subscriber_id: 'bob', subscription_id: second },
      details: { plan_id: 'team' },
    });
  });

  it('override put (new, changed, same) and delete', async () => {
    await call('POST', '/org/subscribers', { subscriber_id: 'carol' });
    const url = '/org/subscribers/carol/overrides/seats';
    const created = await call('PUT', url, { kind: 'limit', limit: 10 });
    expect(created.res.statusCode).toBe(200);
    expect(created.entry).toMatchObject({
      route: '/org/subscribers/{subscriber_id}/overrides/{feature_key}',
      params: { subscriber_id: 'carol', feature_key: 'seats' },
      details: { override_id: created.body.id, kind: 'limit', limit: 10, expires_at: null },
    });
    const changed = await call('PUT', url, { kind: 'limit', limit: null });
    expect(changed.entry!.details).toEqual({ limit: { from: 10, to: null } });
    expect((await call('PUT', url, { kind: 'limit', limit: null })).entry!.details).toBeNull();
    const deleted = await call('DELETE', url);
    expect(deleted.entry).toMatchObject({ method: 'DELETE', status: 204, details: null });
  });
});

describe('webhook and identity', () => {
  it('webhook put, rotate, disable', async () => {
    const put = await call('PUT', '/org/webhook', { url: 'https://hooks.example.com/ent' });
    expect(put.res.statusCode).toBeLessThan(300);
    expect(put.entry).toMatchObject({
      service: 'api',
      route: '/org/webhook',
      details: { url: 'https://hooks.example.com/ent' },
    });
    expect(put.entry!.details!.secret_prefix).toEqual(expect.any(String));
    const rotate = await call('POST', '/org/webhook/rotate');
    expect(rotate.entry!.details).toEqual({
      secret_prefix: { from: put.entry!.details!.secret_prefix, to: expect.any(String) },
    });
    const disable = await call('POST', '/org/webhook/disable');
    expect(disable.entry!.details).toEqual({ disabled: { from: false, to: true } });
  });

  it('records a webhook URL without its query string or fragment (receivers put tokens there)', async () => {
    const withToken = await call('PUT', '/org/webhook', {
      url: 'https://hooks.example.com/q?token=s3cr3t#f',
    });
    expect(withToken.res.statusCode).toBeLessThan(300);
    expect(withToken.entry!.details!.url).toEqual({
      from: expect.any(String),
      to: 'https://hooks.example.com/q?[redacted]',
    });
    const tokenChanged = await call('PUT', '/org/webhook', { url: 'https://hooks.example.com/q?token=n3w' });
    expect(tokenChanged.entry!.details).toEqual({
      url: { from: 'https://hooks.example.com/q?[redacted]', to: 'https://hooks.example.com/q?[redacted]' },
    });
    const plain = await call('PUT', '/org/webhook', { url: 'https://hooks.example.com/plain' });
    expect(plain.entry!.details).toEqual({
      url: { from: 'https://hooks.example.com/q?[redacted]', to: 'https://hooks.example.com/plain' },
    });
    expect(JSON.stringify([withToken.entry, tokenChanged.entry, plain.entry])).not.toMatch(/s3cr3t|n3w/);
    const shown = await call('GET', '/org/webhook');
    expect(shown.body.url).toBe('https://hooks.example.com/plain');
  });

  it('organization, service account, key, invite and member writes are service identity', async () => {
    const renamed = await call('PATCH', '/org', { name: 'Walkthrough Inc' });
    expect(renamed.entry).toMatchObject({
      service: 'identity',
      route: '/org',
      details: { name: { from: 'Walkthrough', to: 'Walkthrough Inc' } },
    });

    const sa = await call('POST', '/org/service-accounts', { name: 'ci', role: 'admin' });
    expect(sa.res.statusCode).toBe(201);
    const saId = sa.body.service_account_id as string;
    expect(sa.entry).toMatchObject({
      service: 'identity',
      details: { service_account_id: saId, name: 'ci', role: 'admin' },
    });
    expect(sa.entry!.details!.member_id).toEqual(expect.stringMatching(/^mem_/));

    const key = await call('POST', `/org/service-accounts/${saId}/api-keys`, { name: 'deploy', scopes: [] });
    expect(key.res.statusCode).toBe(201);
    expect(key.entry).toMatchObject({
      service: 'identity',
      route: '/org/service-accounts/{service_account_id}/api-keys',
      params: { service_account_id: saId },
    });
    expect(key.entry!.details).toEqual({
      key_id: expect.any(String),
      key_prefix: expect.stringMatching(/^svc-mk-1-/),
      name: 'deploy',
    });
    const plaintext = secrets.find(
      (s) => s.startsWith(key.entry!.details!.key_prefix as string) && s.length > 30,
    )!;
    expect(plaintext).toBeTruthy();
    const byNewKey = await call(
      'POST',
      '/org/features',
      { key: 'by-new-key', name: 'x', kind: 'flag' },
      { 'x-api-key': plaintext },
    );
    expect(byNewKey.entry!.actor).toMatchObject({
      member_id: sa.entry!.details!.member_id,
      key_prefix: keyPrefixOf(plaintext),
    });
    expect(byNewKey.entry!.actor.key_prefix).toBe(key.entry!.details!.key_prefix);

    const invite = await call('POST', '/org/invites', { role: 'viewer' });
    expect(invite.res.statusCode).toBe(201);
    expect(invite.entry).toMatchObject({
      service: 'identity',
      details: { invite_id: expect.stringMatching(/^inv_/), role: 'viewer' },
    });
    const invites = await call('GET', '/org/invites');
    expect(invites.res.statusCode).toBe(200);
    expect(invites.entry).toMatchObject({
      service: 'identity',
      method: 'GET',
      route: '/org/invites',
      status: 200,
      details: null,
    });

    const member = await call('POST', '/org/members', { email: 'dev@example.com', role: 'developer' });
    expect(member.res.statusCode).toBe(201);
    expect(member.entry).toMatchObject({
      service: 'identity',
      details: { member_id: expect.stringMatching(/^mem_/), role: 'developer' },
    });
    const memberId = member.entry!.details!.member_id as string;
    const promoted = await call('PATCH', `/org/members/${memberId}`, { role: 'admin' });
    expect(promoted.entry).toMatchObject({
      params: { member_id: memberId },
      details: { role: { from: 'developer', to: 'admin' } },
    });
  });

  it('a developer changing members is rejected (403) and recorded', async () => {
    const developer = await createKeyWithScopes(ctx.db, org.organization_id, [], 'developer');
    secrets.push(developer.apiKey);
    const res = await call(
      'POST',
      '/org/members',
      { email: 'x@example.com', role: 'admin' },
      { 'x-api-key': developer.apiKey },
    );
    expect(res.res.statusCode).toBe(403);
    expect(res.entry).toMatchObject({
      outcome: 'rejected',
      status: null,
      service: 'identity',
      actor: { member_id: developer.memberId },
    });
  });
});

describe('recording feature writes', () => {
  it('records a create with every field SPEC.md names', async () => {
    const key = uniqueKey('sso');
    const before = Date.now();
    const res = await inject('POST', '/org/features', { key, name: 'Single sign-on', kind: 'flag' });
    expect(res.statusCode).toBe(201);
    const requestId = res.headers['x-request-id'] as string;
    const entry = await entryFor(requestId);
    expect(entry).toEqual({
      id: expect.stringMatching(/^aud_[0-9a-z]{26}$/),
      occurred_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      request_id: requestId,
      organization_id: org.organization_id,
      actor: { member_id: org.member_id, auth_type: 'member_apikey', key_prefix: keyPrefixOf(org.api_key) },
      service: 'api',
      method: 'POST',
      route: '/org/features',
      params: {},
      ip: '127.0.0.1',
      user_agent: 'audit-test/1.0',
      outcome: 'responded',
      status: 201,
      details: { key, name: 'Single sign-on', kind: 'flag' },
    });
    const occurred = Date.parse(entry.occurred_at);
    expect(occurred).toBeGreaterThanOrEqual(before);
    expect(occurred).toBeLessThanOrEqual(Date.now());
  });

  it('records a change as {from, to} with the route template and params', async () => {
    const key = uniqueKey('sso');
    await createFeature(key, 'Single sign-on');
    const res = await inject('PATCH', `/org/features/${key}`, { name: 'SSO', description: 'SAML and OIDC' });
    expect(res.statusCode).toBe(200);
    const entry = await entryFor(res.headers['x-request-id'] as string);
    expect(entry).toMatchObject({
      method: 'PATCH',
      route: '/org/features/{key}',
      params: { key },
      outcome: 'responded',
      status: 200,
      details: {
        name: { from: 'Single sign-on', to: 'SSO' },
        description: { from: '', to: 'SAML and OIDC' },
      },
    });
  });

  it('records a write that changed nothing with details null', async () => {
    const key = uniqueKey('sso');
    await createFeature(key, 'SSO');
    const res = await inject('PATCH', `/org/features/${key}`, { name: 'SSO' });
    expect(res.statusCode).toBe(200);
    const entry = await entryFor(res.headers['x-request-id'] as string);
    expect(entry).toMatchObject({ outcome: 'responded', status: 200, details: null });
  });

  it('records a failed write with its status and no details', async () => {
    const key = uniqueKey('sso');
    await createFeature(key, 'SSO');
    const res = await inject('POST', '/org/features', { key, name: 'Again', kind: 'flag' });
    expect(res.statusCode).toBe(409);
    expect(await entryFor(res.json().error.request_id)).toMatchObject({
      outcome: 'responded',
      status: 409,
      details: null,
    });
    const invalid = await inject('POST', '/org/features', { key: 'Bad Key', name: 'x', kind: 'flag' });
    expect(invalid.statusCode).toBe(422);
    expect(await entryFor(invalid.json().error.request_id)).toMatchObject({
      outcome: 'responded',
      status: 422,
    });
  });

  it('replaces a field over 2 KiB with {too_large: true}, still naming it', async () => {
    const key = uniqueKey('sso');
    await createFeature(key, 'SSO');
    const description = 'x'.repeat(5000);
    const res = await inject('PATCH', `/org/features/${key}`, { description, name: 'SSO!' });
    expect(res.statusCode).toBe(200);
    const entry = await entryFor(res.headers['x-request-id'] as string);
    expect(entry.details).toEqual({ description: { too_large: true }, name: { from: 'SSO', to: 'SSO!' } });
  });

  it('names the forwarded caller only when the request comes from a trusted proxy', async () => {
    const res = await inject(
      'POST',
      '/org/features',
      { key: 'fwd', name: 'Fwd', kind: 'flag' },
      {
        ...org.headers,
        'x-forwarded-for': '203.0.113.9',
      },
    );
    expect((await entryFor(res.headers['x-request-id'] as string)).ip).toBe('203.0.113.9');
    const direct = await ctx.app.inject({
      method: 'POST',
      url: '/org/features',
      headers: { ...org.headers, 'x-forwarded-for': '203.0.113.9', 'user-agent': '' },
      payload: { key: 'fwd2', name: 'Fwd', kind: 'flag' },
      remoteAddress: '198.51.100.7',
    });
    const entry = await entryFor(direct.headers['x-request-id'] as string);
    expect(entry.ip).toBe('198.51.100.7');
    expect(entry.user_agent).toBeNull();
  });

  it('does not record reads, unknown routes or requests without a valid key', async () => {
    const before = await countRows();
    await inject('GET', '/org/features');
    await inject('GET', '/org/features/sso');
    await inject('POST', '/org/features', { key: 'nokey', name: 'x', kind: 'flag' }, {});
    await inject(
      'POST',
      '/org/features',
      { key: 'nokey', name: 'x', kind: 'flag' },
      { 'x-api-key': 'svc-mk-1-nope' },
    );
    await inject('POST', '/org/no-such-route', {});
    await list();
    expect(await countRows()).toEqual(before);
  });
});

describe('403: rejected', () => {
  it('records a check-only key calling POST /org/features as rejected, and nothing ran', async () => {
    const key = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    plaintextKeys.push(key.apiKey);
    const res = await inject(
      'POST',
      '/org/features',
      { key: 'denied', name: 'Denied', kind: 'flag' },
      { 'x-api-key': key.apiKey },
    );
    expect(res.statusCode).toBe(403);
    const entry = await entryFor(res.json().error.request_id);
    expect(entry).toMatchObject({
      actor: { member_id: key.memberId, auth_type: 'member_apikey', key_prefix: keyPrefixOf(key.apiKey) },
      method: 'POST',
      route: '/org/features',
      outcome: 'rejected',
      status: null,
      details: null,
    });
    expect((await inject('GET', '/org/features/denied')).statusCode).toBe(404);
  });

  it('refuses the audit read to a key without org:audit:read or a non-admin role', async () => {
    const catalog = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:read']);
    const developer = await createKeyWithScopes(ctx.db, org.organization_id, [], 'developer');
    plaintextKeys.push(catalog.apiKey, developer.apiKey);
    for (const key of [catalog, developer]) {
      const res = await ctx.app.inject({
        method: 'GET',
        url: '/org/audit-events',
        headers: { 'x-api-key': key.apiKey },
      });
      expect(res.statusCode).toBe(403);
    }
    const auditor = await createKeyWithScopes(ctx.db, org.organization_id, ['org:audit:read']);
    plaintextKeys.push(auditor.apiKey);
    const res = await ctx.app.inject({
      method: 'GET',
      url: '/org/audit-events',
      headers: { 'x-api-key': auditor.apiKey },
    });
    expect(res.statusCode).toBe(200);
  });
});

describe('503 when the entry cannot be recorded', () => {
  it('refuses the write with 503 SERVICE_UNAVAILABLE when INSERT on the log is refused, and nothing changes', async () => {
    const key = uniqueKey('sso');
    await createFeature(key, 'SSO!');
    const before = await countRows();
    await refuseInserts('audit_events');
    try {
      const res = await inject('POST', '/org/features', {
        key: 'unaudited',
        name: 'Unaudited',
        kind: 'flag',
      });
      expect(res.statusCode).toBe(503);
      expect(res.json().error).toMatchObject({
        code: 'SERVICE_UNAVAILABLE',
        type: 'api_error',
        request_id: res.headers['x-request-id'],
      });
      const patch = await inject('PATCH', `/org/features/${key}`, { name: 'Changed while unaudited' });
      expect(patch.statusCode).toBe(503);
      // Reads keep working.
      expect((await inject('GET', `/org/features/${key}`)).statusCode).toBe(200);
    } finally {
      await allowInserts('audit_events');
    }
    expect((await inject('GET', '/org/features/unaudited')).statusCode).toBe(404);
    expect((await inject('GET', `/org/features/${key}`)).json().name).toBe('SSO!');
    expect(await countRows()).toEqual(before);
  });

  it('answers 503 quickly when the log table is locked, and the write never runs', async () => {
    await whileLocked('audit_events', async () => {
      const started = Date.now();
      const res = await inject('POST', '/org/features', { key: 'locked', name: 'Locked', kind: 'flag' });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe('SERVICE_UNAVAILABLE');
      expect(Date.now() - started).toBeLessThan(5000);
    });
    expect((await inject('GET', '/org/features/locked')).statusCode).toBe(404);
    const retry = await inject('POST', '/org/features', { key: 'locked', name: 'Locked', kind: 'flag' });
    expect(retry.statusCode).toBe(201);
    expect((await entryFor(retry.headers['x-request-id'] as string)).outcome).toBe('responded');
  });

  it('answers 503 quickly when the API key cannot be looked up (keys table locked), and nothing runs', async () => {
    await whileLocked('api_keys', async () => {
      const started = Date.now();
      const res = await inject('POST', '/org/features', { key: 'unlooked', name: 'Unlooked', kind: 'flag' });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.message).toMatch(/Credentials cannot be checked/);
      // Within the lookup's own bound, not the main pool's 10 s statement timeout.
      expect(Date.now() - started).toBeLessThan(5000);
    });
    expect((await inject('GET', '/org/features/unlooked')).statusCode).toBe(404);
  });
});

describe('an outcome commits with its write', () => {
  // The race of a database lost between a write's commit and its send (fault row postgres-stopped): an outcome
  // appended as the response leaves would fail here, and the entry would stay pending behind a 2xx.
  let refuseFrom: string | null = null;
  beforeAll(() =>
    ctx.app.writePipeline.onCommitted(async (request) => {
      if (refuseFrom === null || request.headers['x-probe'] !== refuseFrom) return;
      await refuseInserts('audit_outcomes');
    }),
  );

  it('records a 2xx as responded although the log refuses every insert from the commit on', async () => {
    const key = uniqueKey('committed');
    refuseFrom = key;
    try {
      const res = await inject(
        'POST',
        '/org/features',
        { key, name: 'Committed', kind: 'flag' },
        {
          ...org.headers,
          'x-probe': key,
        },
      );
      expect(res.statusCode).toBe(201);
      expect(await entryFor(res.headers['x-request-id'] as string)).toMatchObject({
        outcome: 'responded',
        status: 201,
        details: { key, name: 'Committed', kind: 'flag' },
      });
      // While the log refuses outcomes, a write it cannot record is refused whole, as when it refuses entries.
      const refused = await inject(
        'PATCH',
        `/org/features/${key}`,
        { name: 'Not recorded' },
        {
          ...org.headers,
          'x-probe': 'none',
        },
      );
      expect(refused.statusCode).toBe(503);
      expect(refused.json().error.code).toBe('SERVICE_UNAVAILABLE');
    } finally {
      refuseFrom = null;
      await allowInserts('audit_outcomes');
    }
    expect((await inject('GET', `/org/features/${key}`)).json().name).toBe('Committed');
  });

  it('does so for the organization itself (PATCH /org) and a credit', async () => {
    const probe = uniqueKey('probe');
    refuseFrom = probe;
    try {
      const headers = { ...org.headers, 'x-probe': probe };
      const renamed = await inject('PATCH', '/org', { name: 'Walkthrough, renamed' }, headers);
      expect(renamed.statusCode).toBe(200);
      expect(await entryFor(renamed.headers['x-request-id'] as string)).toMatchObject({
        outcome: 'responded',
        status: 200,
      });
    } finally {
      await allowInserts('audit_outcomes');
    }
    try {
      const key = uniqueKey('metered');
      expect(
        (await inject('POST', '/org/features', { key, name: 'Metered', kind: 'metered' })).statusCode,
      ).toBe(201);
      const subscriber = uniqueKey('credited');
      expect((await inject('POST', '/org/subscribers', { subscriber_id: subscriber })).statusCode).toBe(201);
      const credit = await inject(
        'POST',
        `/org/subscribers/${subscriber}/credits`,
        { feature: key, amount: 10 },
        { ...org.headers, 'x-probe': probe },
      );
      expect(credit.statusCode, credit.body).toBe(201);
      expect(await entryFor(credit.headers['x-request-id'] as string)).toMatchObject({
        outcome: 'responded',
        status: 201,
      });
    } finally {
      refuseFrom = null;
      await allowInserts('audit_outcomes');
    }
  });

  it('answers 503 quickly when the outcomes table is locked, and the write is rolled back', async () => {
    const key = uniqueKey('outcome-locked');
    await whileLocked('audit_outcomes', async () => {
      const started = Date.now();
      const res = await inject('POST', '/org/features', { key, name: 'Locked', kind: 'flag' });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe('SERVICE_UNAVAILABLE');
      // Within the audit's own bounds, not the main pool's 10 s statement timeout.
      expect(Date.now() - started).toBeLessThan(5000);
    });
    expect((await inject('GET', `/org/features/${key}`)).statusCode).toBe(404);
  });
});

describe('the whole log', () => {
  it('holds no key, webhook secret or invite link', async () => {
    // Secrets at work in an organization of its own, whatever else this file ran before.
    const own = await createTestOrganization(ctx.db, 'Secrets');
    secrets.push(own.api_key);
    const ownCall = async (method: 'POST' | 'PUT', url: string, payload: object) => {
      const res = await ctx.app.inject({ method, url, headers: own.headers, payload });
      expect(res.statusCode, res.body).toBeLessThan(300);
      collectSecrets(res.json());
      return res.json();
    };
    await ownCall('PUT', '/org/webhook', { url: 'https://hooks.example.com/secrets' });
    await ownCall('POST', '/org/webhook/rotate', {});
    await ownCall('POST', `/org/service-accounts/${own.service_account_id}/api-keys`, {
      name: 'one',
      scopes: [],
    });
    await ownCall('POST', `/org/service-accounts/${own.service_account_id}/api-keys`, {
      name: 'two',
      scopes: [],
    });
    await ownCall('POST', '/org/invites', { role: 'viewer' });
    expect(secrets.some((s) => s.startsWith('whsec_'))).toBe(true);
    expect(secrets.filter((s) => s.startsWith('svc-mk-1-')).length).toBeGreaterThanOrEqual(3);
    const rows = await sql<{ row: string }>`
      SELECT row_to_json(e)::text || coalesce(row_to_json(o)::text, '') AS row
      FROM audit_events e LEFT JOIN audit_outcomes o ON o.event_id = e.id`.execute(ctx.ownerDb);
    const dump = rows.rows.map((r) => r.row).join('\n');
    expect(secrets.filter((secret) => dump.includes(secret))).toEqual([]);
    expect(dump.match(/whsec_[A-Za-z0-9+/=_-]{20,}|svc-mk-1-[A-Za-z0-9]{20,}/)).toBeNull();
  });
});

describe('no secrets in the log', () => {
  it('holds no plaintext key anywhere, in the tables or through the API', async () => {
    // Keys of every kind at work (whatever else this file ran before): writes, refusals, and keys made over the API.
    const own = await createTestOrganization(ctx.db, 'Keys org');
    plaintextKeys.push(own.api_key);
    for (const scopes of [['catalog:write'], ['check'], ['org:write'], ['catalog:read']] as const) {
      const key = await createKeyWithScopes(ctx.db, own.organization_id, [...scopes]);
      plaintextKeys.push(key.apiKey);
      for (let i = 0; i < 6; i++) {
        await inject(
          'POST',
          '/org/features',
          { key: uniqueKey('swept'), name: 'Swept', kind: 'flag' },
          { 'x-api-key': key.apiKey },
        );
      }
    }
    const made = await inject(
      'POST',
      `/org/service-accounts/${own.service_account_id}/api-keys`,
      { name: 'made over the API' },
      own.headers,
    );
    expect(made.statusCode, made.body).toBe(201);
    plaintextKeys.push(made.json().api_key);
    expect(plaintextKeys.length).toBeGreaterThan(5);
    const rows = await sql<{ row: string }>`
      SELECT row_to_json(e)::text || coalesce(row_to_json(o)::text, '') AS row
      FROM audit_events e LEFT JOIN audit_outcomes o ON o.event_id = e.id`.execute(ctx.ownerDb);
    expect(rows.rows.length).toBeGreaterThan(20);
    const dump = rows.rows.map((r) => r.row).join('\n');
    for (const key of plaintextKeys) {
      expect(dump).not.toContain(key);
      expect(dump).not.toContain(key.slice(keyPrefixOf(key).length));
    }
    for (const headers of [org.headers, other.headers, own.headers]) {
      let cursor = '';
      for (let page = 0; page < 50; page++) {
        const body = await list(`?limit=100${cursor}`, headers);
        const json = JSON.stringify(body);
        for (const key of plaintextKeys) expect(json).not.toContain(key);
        if (!body.has_more) break;
        cursor = `&starting_after=${body.audit_events.at(-1)!.id}`;
      }
    }
  });
});
