import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Role, Scope } from '@ent/common/auth/scopes';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { caller } from '../../../test-support/identity-context.ts';

/**
 * Role x scope matrix for the org:* family. Written out independently of ROLE_SCOPES: admin and developer may
 * read and write, a viewer only reads; member changes and invites are for admins only.
 */
let ctx: AdminTestContext;
let org: TestOrganization;
let api: ReturnType<typeof caller>;
let viewerAccount: { service_account_id: string; member_id: string };
let counter = 0;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Matrix');
  api = caller(ctx, org.api_key);
  viewerAccount = (await api.post('/org/service-accounts', { name: 'Target', role: 'viewer' })).json();
  expect((await api.put('/org/webhook', { url: 'http://127.0.0.1:9/matrix' })).statusCode).toBe(201);
});
afterAll(() => ctx.close());

type Access = 'read' | 'write';
interface RouteCase {
  name: string;
  access: Access;
  adminOnly?: boolean;
  /** Gives someone the viewer role: the caller must hold every scope a viewer has. */
  grantsViewer?: boolean;
  /** Manages keys of another service account: full-access keys only. */
  othersKeys?: boolean;
  ok: number;
  send: (c: ReturnType<typeof caller>) => ReturnType<ReturnType<typeof caller>['get']>;
}

const routes: RouteCase[] = [
  { name: 'GET /org', access: 'read', ok: 200, send: (c) => c.get('/org') },
  { name: 'PATCH /org', access: 'write', ok: 200, send: (c) => c.patch('/org', { name: 'Matrix' }) },
  { name: 'GET /org/members', access: 'read', ok: 200, send: (c) => c.get('/org/members') },
  {
    name: 'POST /org/members',
    access: 'write',
    adminOnly: true,
    grantsViewer: true,
    ok: 201,
    send: (c) => c.post('/org/members', { email: `m${++counter}@example.com`, role: 'viewer' }),
  },
  {
    name: 'PATCH /org/members/{id}',
    access: 'write',
    adminOnly: true,
    ok: 200,
    send: (c) => c.patch(`/org/members/${viewerAccount.member_id}`, { role: 'viewer' }),
  },
  {
    name: 'POST /org/invites',
    access: 'write',
    adminOnly: true,
    grantsViewer: true,
    ok: 201,
    send: (c) => c.post('/org/invites', { role: 'viewer' }),
  },
  { name: 'GET /org/invites', access: 'read', adminOnly: true, ok: 200, send: (c) => c.get('/org/invites') },
  {
    name: 'DELETE /org/invites/{id}',
    access: 'write',
    adminOnly: true,
    ok: 404,
    send: (c) => c.delete('/org/invites/inv_unknown'),
  },
  { name: 'GET /org/service-accounts', access: 'read', ok: 200, send: (c) => c.get('/org/service-accounts') },
  {
    name: 'POST /org/service-accounts',
    access: 'write',
    ok: 201,
    send: (c) => c.post('/org/service-accounts', { name: 'x', role: 'viewer' }),
  },
  {
    name: 'PATCH /org/service-accounts/{id}',
    access: 'write',
    ok: 200,
    send: (c) => c.patch(`/org/service-accounts/${viewerAccount.service_account_id}`, { name: 'Target' }),
  },
  {
    name: 'GET .../api-keys',
    access: 'read',
    ok: 200,
    send: (c) => c.get(`/org/service-accounts/${viewerAccount.service_account_id}/api-keys`),
  },
  {
    name: 'POST .../api-keys',
    access: 'write',
    othersKeys: true,
    ok: 201,
    send: (c) => c.post(`/org/service-accounts/${viewerAccount.service_account_id}/api-keys`, {}),
  },
  {
    name: 'DELETE .../api-keys/{id}',
    access: 'write',
    othersKeys: true,
    ok: 404,
    send: (c) => c.delete(`/org/service-accounts/${viewerAccount.service_account_id}/api-keys/key_unknown`),
  },
  { name: 'GET /org/webhook', access: 'read', ok: 200, send: (c) => c.get('/org/webhook') },
  {
    name: 'PUT /org/webhook',
    access: 'write',
    ok: 200,
    send: (c) => c.put('/org/webhook', { url: 'http://127.0.0.1:9/matrix' }),
  },
  { name: 'POST /org/webhook/enable', access: 'write', ok: 200, send: (c) => c.post('/org/webhook/enable') },
  {
    name: 'GET /org/webhook/deliveries',
    access: 'read',
    ok: 200,
    send: (c) => c.get('/org/webhook/deliveries'),
  },
];

const keys: [Role, Scope[]][] = [];
for (const role of ['admin', 'developer', 'viewer'] as Role[]) {
  for (const scopes of [
    [],
    ['org:read'],
    ['org:write'],
    ['org:read', 'org:write'],
    ['check'],
    ['catalog:read', 'catalog:write'],
  ] as Scope[][]) {
    keys.push([role, scopes]);
  }
}

function allowed(route: RouteCase, role: Role, scopes: Scope[]): boolean {
  const roleAllows = role === 'viewer' ? route.access === 'read' : true;
  const keyAllows =
    scopes.length === 0 || scopes.includes(route.access === 'read' ? 'org:read' : 'org:write');
  const viewerScopes: Scope[] = ['check', 'catalog:read', 'subscribers:read', 'org:read'];
  const holdsViewer = scopes.length === 0 || viewerScopes.every((scope) => scopes.includes(scope));
  return (
    roleAllows &&
    keyAllows &&
    (!route.adminOnly || role === 'admin') &&
    (!route.grantsViewer || holdsViewer) &&
    (!route.othersKeys || scopes.length === 0)
  );
}

describe('role x scope matrix (org:*)', () => {
  it.each(keys)('%s with scopes %j', async (role, scopes) => {
    const key = await createKeyWithScopes(ctx.db, org.organization_id, scopes, role);
    const c = caller(ctx, key.apiKey);
    const mismatches: string[] = [];
    for (const route of routes) {
      const res = await route.send(c);
      const expected = allowed(route, role, scopes) ? route.ok : 403;
      if (res.statusCode !== expected)
        mismatches.push(`${route.name}: got ${res.statusCode}, expected ${expected}`);
    }
    expect(mismatches).toEqual([]);
  });
});
