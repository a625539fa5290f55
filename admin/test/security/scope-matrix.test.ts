import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES, type Role, type Scope } from '@ent/common/auth/scopes';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { seedCatalog } from './tenant-data.ts';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

interface RouteCase {
  family: string;
  method: Method;
  /** A function so each call can use fresh ids (a write that is let through may really happen). */
  url: () => string;
  payload?: () => object;
  /** The one scope that lets a key call the route. */
  scope: Scope;
}

let ctx: AdminTestContext;
let org: TestOrganization;
let activeSubscriptionId: string;
let counter = 0;
const unique = (prefix: string) => `${prefix}-${++counter}`;

/**
 * One read and one write (or more) of each family, each with the scope it needs; every other scope must be
 * refused with 403, and the needed scope must get past authorization (anything but 401/403).
 */
const routes: RouteCase[] = [
  { family: 'features', method: 'GET', url: () => '/org/features', scope: 'catalog:read' },
  { family: 'features', method: 'GET', url: () => '/org/features/sso', scope: 'catalog:read' },
  {
    family: 'features',
    method: 'POST',
    url: () => '/org/features',
    payload: () => ({ key: unique('f'), name: 'F', kind: 'flag' }),
    scope: 'catalog:write',
  },
  {
    family: 'features',
    method: 'PATCH',
    url: () => '/org/features/sso',
    payload: () => ({ name: unique('SSO') }),
    scope: 'catalog:write',
  },
  { family: 'plans', method: 'GET', url: () => '/org/plans', scope: 'catalog:read' },
  { family: 'plans', method: 'GET', url: () => '/org/plans/basic', scope: 'catalog:read' },
  {
    family: 'plans',
    method: 'POST',
    url: () => '/org/plans',
    payload: () => ({ key: unique('p'), name: 'P', kind: 'custom', grants: [] }),
    scope: 'catalog:write',
  },
  {
    family: 'plans',
    method: 'PATCH',
    url: () => '/org/plans/basic',
    payload: () => ({ name: unique('Basic') }),
    scope: 'catalog:write',
  },
  { family: 'subscribers', method: 'GET', url: () => '/org/subscribers', scope: 'subscribers:read' },
  { family: 'subscribers', method: 'GET', url: () => '/org/subscribers/alice', scope: 'subscribers:read' },
  { family: 'usage', method: 'GET', url: () => '/org/usage/history', scope: 'subscribers:read' },
  {
    family: 'subscribers',
    method: 'POST',
    url: () => '/org/subscribers',
    payload: () => ({ subscriber_id: unique('s') }),
    scope: 'subscribers:write',
  },
  {
    family: 'subscribers',
    method: 'PATCH',
    url: () => '/org/subscribers/alice',
    payload: () => ({ name: unique('Alice') }),
    scope: 'subscribers:write',
  },
  {
    family: 'subscriptions',
    method: 'GET',
    url: () => '/org/subscribers/alice/subscriptions',
    scope: 'subscribers:read',
  },
  {
    family: 'subscriptions',
    method: 'POST',
    url: () => '/org/subscribers/alice/subscriptions',
    payload: () => ({ plan_id: 'pro' }),
    scope: 'subscribers:write',
  },
  {
    family: 'subscriptions',
    method: 'POST',
    url: () => '/org/subscribers/alice/subscriptions/change',
    payload: () => ({ plan_id: 'pro', subscription_id: activeSubscriptionId }),
    scope: 'subscribers:write',
  },
  {
    family: 'subscriptions',
    method: 'POST',
    url: () => `/org/subscribers/alice/subscriptions/${activeSubscriptionId}/cancel`,
    scope: 'subscribers:write',
  },
  {
    family: 'overrides',
    method: 'GET',
    url: () => '/org/subscribers/alice/overrides',
    scope: 'subscribers:read',
  },
  {
    family: 'overrides',
    method: 'GET',
    url: () => '/org/subscribers/alice/overrides/sso',
    scope: 'subscribers:read',
  },
  {
    family: 'overrides',
    method: 'PUT',
    url: () => '/org/subscribers/alice/overrides/sso',
    payload: () => ({ kind: 'flag', allowed: counter++ % 2 === 0 }),
    scope: 'subscribers:write',
  },
  {
    family: 'overrides',
    method: 'DELETE',
    url: () => '/org/subscribers/alice/overrides/seats',
    scope: 'subscribers:write',
  },
  // Metered usage on admin (past periods, corrections); the seeded features are not metered: 422 past the scope.
  {
    family: 'metered usage',
    method: 'GET',
    url: () => '/org/subscribers/alice/usage/seats/periods',
    scope: 'subscribers:read',
  },
  {
    family: 'metered usage',
    method: 'PUT',
    url: () => '/org/subscribers/alice/usage/seats',
    payload: () => ({ used: 1 }),
    scope: 'subscribers:write',
  },
];

const keys = new Map<string, string>();
const keyFor = async (scopes: Scope[], role: Role = 'admin') => {
  const name = `${role}:${scopes.join(',')}`;
  if (!keys.has(name))
    keys.set(name, (await createKeyWithScopes(ctx.db, org.organization_id, scopes, role)).apiKey);
  return keys.get(name)!;
};

const call = async (route: RouteCase, apiKey: string) => {
  const payload = route.payload?.();
  return ctx.app.inject({
    method: route.method,
    url: route.url(),
    headers: { 'x-api-key': apiKey },
    ...(payload === undefined ? {} : { payload }),
  });
};

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Acme');
  const setup = async (method: Method, url: string, payload: object) => {
    const res = await ctx.app.inject({ method, url, headers: org.headers, payload });
    expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
    return res.json();
  };
  await seedCatalog(ctx.db, org.organization_id, setup);
  await setup('POST', '/org/subscribers', { subscriber_id: 'alice' });
  activeSubscriptionId = (await setup('POST', '/org/subscribers/alice/subscriptions', { plan_id: 'basic' }))
    .subscription_id;
});
afterAll(() => ctx.close());

/** Test names are made before beforeAll runs, while the subscription id is still unknown. */
const label = (route: RouteCase) =>
  `${route.method} ${route.url().replace(String(activeSubscriptionId), '{subscription_id}')}`;
const named = routes.map((route) => [label(route), route] as const);
const expectLetThrough = (status: number, why: string) => {
  expect([401, 403], why).not.toContain(status);
  expect(status, why).toBeLessThan(500);
};

describe.each(SCOPES.map((scope) => [scope]))('a key with only %s', (scope) => {
  it.each(named)('%s', async (_name, route) => {
    const res = await call(route, await keyFor([scope]));
    if (route.scope === scope) {
      expectLetThrough(res.statusCode, `${label(route)} ${res.body}`);
    } else {
      expect(res.statusCode, `${label(route)} ${res.body}`).toBe(403);
      expect(res.json().error).toMatchObject({ code: 'FORBIDDEN', type: 'permission_error' });
    }
  });
});

describe('full-access keys and roles', () => {
  it.each(named)('an admin full-access key may call %s', async (_name, route) => {
    const res = await call(route, await keyFor([]));
    expectLetThrough(res.statusCode, `${label(route)} ${res.body}`);
  });

  it.each(named)('a developer full-access key may call %s', async (_name, route) => {
    const res = await call(route, await keyFor([], 'developer'));
    expectLetThrough(res.statusCode, `${label(route)} ${res.body}`);
  });

  it.each(named)('a viewer full-access key may only read: %s', async (_name, route) => {
    const res = await call(route, await keyFor([], 'viewer'));
    if (route.method === 'GET') expectLetThrough(res.statusCode, `${label(route)} ${res.body}`);
    else expect(res.statusCode).toBe(403);
  });

  it('a key with both subscribers scopes reads and writes subscribers but not the catalog', async () => {
    const apiKey = await keyFor(['subscribers:read', 'subscribers:write']);
    for (const route of routes) {
      const res = await call(route, apiKey);
      if (route.family === 'features' || route.family === 'plans') expect(res.statusCode).toBe(403);
      else expectLetThrough(res.statusCode, `${label(route)} ${res.body}`);
    }
  });
});
