import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { caller } from '../../../test-support/identity-context.ts';

/** The audit entries these routes produce, read back through the audit log route. */
let ctx: AdminTestContext;
let org: TestOrganization;
let api: ReturnType<typeof caller>;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Audited');
  api = caller(ctx, org.api_key);
});
afterAll(() => ctx.close());

async function entryFor(requestId: string) {
  const res = await api.get(`/org/audit-events?request_id=${requestId}`);
  expect(res.statusCode).toBe(200);
  const entries = res.json().audit_events as Record<string, unknown>[];
  return entries.find((entry) => entry.outcome !== 'pending') ?? entries[0];
}

describe('audit entries of organization, member, invite, service account, key and webhook writes', () => {
  it('records each write with its service, route, params and details, and never a secret', async () => {
    const secrets: string[] = [];
    const account = await api.post('/org/service-accounts', { name: 'Audit SA', role: 'developer' });
    const key = await api.post(`/org/service-accounts/${account.json().service_account_id}/api-keys`, {
      name: 'k',
    });
    secrets.push(key.json().api_key);
    const invite = await api.post('/org/invites', { role: 'viewer' });
    secrets.push(invite.json().url, invite.json().url.split('/').at(-1));
    const listInvites = await api.get('/org/invites');
    const webhook = await api.put('/org/webhook', { url: 'http://127.0.0.1:9/audit' });
    secrets.push(webhook.json().secret);
    const rotate = await api.post('/org/webhook/rotate');
    secrets.push(rotate.json().secret);
    const member = await api.post('/org/members', { email: 'audit@example.com', role: 'viewer' });
    const patchMember = await api.patch(`/org/members/${member.json().member_id}`, { role: 'developer' });
    const patchOrg = await api.patch('/org', { name: 'Audited 2' });
    const disable = await api.post('/org/webhook/disable');

    const cases: [typeof account, string, string, Record<string, unknown> | null][] = [
      [
        account,
        'identity',
        '/org/service-accounts',
        {
          service_account_id: account.json().service_account_id,
          member_id: account.json().member_id,
          name: 'Audit SA',
          role: 'developer',
        },
      ],
      [
        key,
        'identity',
        '/org/service-accounts/{service_account_id}/api-keys',
        {
          key_id: key.json().key_id,
          key_prefix: key.json().key_prefix,
          name: 'k',
        },
      ],
      [invite, 'identity', '/org/invites', { invite_id: invite.json().invite_id, role: 'viewer' }],
      [listInvites, 'identity', '/org/invites', null],
      [
        webhook,
        'api',
        '/org/webhook',
        { url: 'http://127.0.0.1:9/audit', secret_prefix: webhook.json().secret_prefix },
      ],
      [
        rotate,
        'api',
        '/org/webhook/rotate',
        { secret_prefix: { from: webhook.json().secret_prefix, to: rotate.json().secret_prefix } },
      ],
      [member, 'identity', '/org/members', { member_id: member.json().member_id, role: 'viewer' }],
      [patchMember, 'identity', '/org/members/{member_id}', { role: { from: 'viewer', to: 'developer' } }],
      [patchOrg, 'identity', '/org', { name: { from: 'Audited', to: 'Audited 2' } }],
      [disable, 'api', '/org/webhook/disable', { disabled: { from: false, to: true } }],
    ];
    for (const [res, service, route, details] of cases) {
      const entry = await entryFor(String(res.headers['x-request-id']));
      expect(entry, route).toMatchObject({
        service,
        route,
        outcome: 'responded',
        status: res.statusCode,
        details,
      });
      const text = JSON.stringify(entry);
      for (const secret of secrets) expect(text).not.toContain(secret);
    }
    const keyEntry = await entryFor(String(key.headers['x-request-id']));
    expect(keyEntry?.params).toEqual({ service_account_id: account.json().service_account_id });
  });

  it("records a developer's role change as rejected (403)", async () => {
    const dev = await createKeyWithScopes(ctx.db, org.organization_id, [], 'developer');
    const res = await caller(ctx, dev.apiKey).patch(`/org/members/${dev.memberId}`, { role: 'admin' });
    expect(res.statusCode).toBe(403);
    const entry = await entryFor(String(res.headers['x-request-id']));
    expect(entry).toMatchObject({
      outcome: 'rejected',
      route: '/org/members/{member_id}',
      service: 'identity',
    });
  });
});
