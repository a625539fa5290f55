import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { seedCatalog } from '../security/tenant-data.ts';

type Method = 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** One request of a route, with what it needs made first (each case makes its own). */
interface Prepared {
  url: string;
  body?: object;
}

let ctx: AdminTestContext;
let org: TestOrganization;
let counter = 0;
const unique = (prefix: string) => `${prefix}-${++counter}`;

const call = (method: Method | 'GET', url: string, body?: object, headers: Record<string, string> = {}) =>
  ctx.app.inject({
    method,
    url,
    headers: { ...org.headers, ...headers },
    ...(body === undefined ? {} : { payload: body }),
  });

/** A write made to set a case up: it must succeed. */
const setup = async (method: Method, url: string, body?: object) => {
  const res = await call(method, url, body);
  expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
  return res.statusCode === 204 ? {} : (res.json() as Record<string, unknown>);
};

const newSubscriber = async () => {
  const id = unique('sub');
  await setup('POST', '/org/subscribers', { subscriber_id: id });
  return id;
};
const newSubscription = async () => {
  const subscriber = await newSubscriber();
  const created = await setup('POST', `/org/subscribers/${subscriber}/subscriptions`, { plan_id: 'basic' });
  return { subscriber, subscription: String(created.subscription_id) };
};
const newPlan = async () => {
  const key = unique('plan');
  await setup('POST', '/org/plans', { key, name: key, kind: 'custom', grants: [] });
  return key;
};
const newServiceAccount = async () =>
  String(
    (await setup('POST', '/org/service-accounts', { name: unique('robot'), role: 'developer' }))
      .service_account_id,
  );

/**
 * Every write under /org that admin answers, keyed as /openapi.json names it. A route missing here fails the test
 * below: a new write cannot skip the Idempotency-Key.
 */
const fixtures: Record<string, () => Promise<Prepared>> = {
  'POST /org/features': async () => ({
    url: '/org/features',
    body: { key: unique('f'), name: 'F', kind: 'flag' },
  }),
  'PATCH /org/features/{key}': async () => ({ url: '/org/features/sso', body: { name: unique('SSO') } }),
  'POST /org/plans': async () => ({
    url: '/org/plans',
    body: { key: unique('p'), name: 'P', kind: 'custom', grants: [] },
  }),
  'PATCH /org/plans/{key}': async () => ({
    url: `/org/plans/${await newPlan()}`,
    body: { name: unique('P') },
  }),
  'DELETE /org/plans/{key}': async () => ({ url: `/org/plans/${await newPlan()}` }),
  'POST /org/plans/{key}/archive': async () => ({ url: `/org/plans/${await newPlan()}/archive` }),
  'POST /org/plans/{key}/unarchive': async () => {
    const key = await newPlan();
    await setup('POST', `/org/plans/${key}/archive`);
    return { url: `/org/plans/${key}/unarchive` };
  },
  'POST /org/subscribers': async () => ({ url: '/org/subscribers', body: { subscriber_id: unique('s') } }),
  'PATCH /org/subscribers/{subscriber_id}': async () => ({
    url: `/org/subscribers/${await newSubscriber()}`,
    body: { name: unique('Name') },
  }),
  'POST /org/subscribers/{subscriber_id}/subscriptions': async () => ({
    url: `/org/subscribers/${await newSubscriber()}/subscriptions`,
    body: { plan_id: 'pro' },
  }),
  'POST /org/subscribers/{subscriber_id}/subscriptions/change': async () => {
    const { subscriber, subscription } = await newSubscription();
    return {
      url: `/org/subscribers/${subscriber}/subscriptions/change`,
      body: { plan_id: 'pro', subscription_id: subscription },
    };
  },
  'POST /org/subscribers/{subscriber_id}/subscriptions/{subscription_id}/cancel': async () => {
    const { subscriber, subscription } = await newSubscription();
    return { url: `/org/subscribers/${subscriber}/subscriptions/${subscription}/cancel` };
  },
  'PUT /org/subscribers/{subscriber_id}/overrides/{feature_key}': async () => ({
    url: `/org/subscribers/${await newSubscriber()}/overrides/sso`,
    body: { kind: 'flag', allowed: true },
  }),
  'POST /org/subscribers/{subscriber_id}/credits': async () => {
    const feature = unique('calls');
    await setup('POST', '/org/features', { key: feature, name: feature, kind: 'metered' });
    return { url: `/org/subscribers/${await newSubscriber()}/credits`, body: { feature, amount: 10 } };
  },
  'DELETE /org/subscribers/{subscriber_id}/credits/{credit_id}': async () => {
    const feature = unique('calls');
    await setup('POST', '/org/features', { key: feature, name: feature, kind: 'metered' });
    const subscriber = await newSubscriber();
    const credit = await setup('POST', `/org/subscribers/${subscriber}/credits`, { feature, amount: 10 });
    return { url: `/org/subscribers/${subscriber}/credits/${String(credit.credit_id)}` };
  },
  'PUT /org/subscribers/{subscriber_id}/usage/{feature}': async () => {
    const feature = unique('calls');
    await setup('POST', '/org/features', { key: feature, name: feature, kind: 'metered' });
    return { url: `/org/subscribers/${await newSubscriber()}/usage/${feature}`, body: { used: 5 } };
  },
  'DELETE /org/subscribers/{subscriber_id}/overrides/{feature_key}': async () => {
    const subscriber = await newSubscriber();
    await setup('PUT', `/org/subscribers/${subscriber}/overrides/sso`, { kind: 'flag', allowed: true });
    return { url: `/org/subscribers/${subscriber}/overrides/sso` };
  },
  'PATCH /org': async () => ({ url: '/org', body: { name: unique('Acme') } }),
  'POST /org/members': async () => ({
    url: '/org/members',
    body: { email: `${unique('person')}@example.com`, role: 'viewer' },
  }),
  'PATCH /org/members/{member_id}': async () => {
    const member = await setup('POST', '/org/members', {
      email: `${unique('person')}@example.com`,
      role: 'viewer',
    });
    return { url: `/org/members/${String(member.member_id)}`, body: { role: 'developer' } };
  },
  'POST /org/invites': async () => ({ url: '/org/invites', body: { role: 'viewer' } }),
  'DELETE /org/invites/{invite_id}': async () => {
    const invite = await setup('POST', '/org/invites', { role: 'viewer' });
    return { url: `/org/invites/${String(invite.invite_id)}` };
  },
  'POST /org/service-accounts': async () => ({
    url: '/org/service-accounts',
    body: { name: unique('robot'), role: 'developer' },
  }),
  'PATCH /org/service-accounts/{service_account_id}': async () => ({
    url: `/org/service-accounts/${await newServiceAccount()}`,
    body: { name: unique('robot') },
  }),
  'POST /org/service-accounts/{service_account_id}/api-keys': async () => ({
    url: `/org/service-accounts/${await newServiceAccount()}/api-keys`,
    body: { name: unique('key') },
  }),
  'DELETE /org/service-accounts/{service_account_id}/api-keys/{key_id}': async () => {
    const account = await newServiceAccount();
    const key = await setup('POST', `/org/service-accounts/${account}/api-keys`, { name: unique('key') });
    return { url: `/org/service-accounts/${account}/api-keys/${String(key.key_id)}` };
  },
  'PUT /org/webhook': async () => ({
    url: '/org/webhook',
    body: { url: `https://example.com/${unique('hook')}` },
  }),
  'POST /org/webhook/rotate': async () => {
    await setup('PUT', '/org/webhook', { url: 'https://example.com/hook' });
    return { url: '/org/webhook/rotate' };
  },
  'POST /org/webhook/enable': async () => {
    await setup('PUT', '/org/webhook', { url: 'https://example.com/hook', disabled: true });
    return { url: '/org/webhook/enable' };
  },
  'POST /org/webhook/disable': async () => {
    await setup('PUT', '/org/webhook', { url: 'https://example.com/hook', disabled: false });
    return { url: '/org/webhook/disable' };
  },
};

/** Documented in admin's OpenAPI document, answered by the gateway itself (its own usage idempotency). */
const GATEWAY_ANSWERED = new Set([
  'POST /org/subscribers/{subscriber_id}/entitlements/check',
  'POST /org/subscribers/{subscriber_id}/usage',
  'POST /org/usage-events',
]);

const WRITE_METHODS = new Set(['post', 'put', 'patch', 'delete']);

interface DocumentedOperation {
  parameters?: { name: string; in: string }[];
}
let document: { paths: Record<string, Record<string, DocumentedOperation>> };

async function documentedWrites(): Promise<string[]> {
  document = (await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json() as typeof document;
  return Object.entries(document.paths).flatMap(([path, operations]) =>
    path === '/org' || path.startsWith('/org/')
      ? Object.keys(operations)
          .filter((method) => WRITE_METHODS.has(method))
          .map((method) => `${method.toUpperCase()} ${path}`)
          .filter((route) => !GATEWAY_ANSWERED.has(route))
      : [],
  );
}

const auditEntries = async (method: string, route: string) =>
  Number(
    (
      await ctx.ownerDb
        .selectFrom('audit_events')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('organization_id', '=', org.organization_id)
        .where('method', '=', method)
        .where('route', '=', route)
        .executeTakeFirstOrThrow()
    ).n,
  );

/** What a replay must not cause again: outbox entries (publishing) and webhook deliveries. */
const sideEffects = async () =>
  Number(
    (
      await ctx.ownerDb
        .selectFrom('outbox')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('organization_id', '=', org.organization_id)
        .executeTakeFirstOrThrow()
    ).n,
  ) +
  Number(
    (
      await ctx.ownerDb
        .selectFrom('webhook_deliveries')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('organization_id', '=', org.organization_id)
        .executeTakeFirstOrThrow()
    ).n,
  );

let routes: string[];

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Acme');
  await seedCatalog(ctx.db, org.organization_id, (method, url, payload) => setup(method, url, payload));
  routes = await documentedWrites();
});
afterAll(() => ctx.close());

describe('Idempotency-Key on every write under /org (from /openapi.json)', () => {
  it('every documented write has a fixture, and every fixture a documented route', () => {
    expect(routes.length).toBeGreaterThan(20);
    expect(
      routes.filter((route) => !(route in fixtures)),
      'routes without a fixture',
    ).toEqual([]);
    expect(
      Object.keys(fixtures).filter((route) => !routes.includes(route)),
      'stale fixtures',
    ).toEqual([]);
  });

  it('the document names the Idempotency-Key header on each of them', () => {
    for (const route of routes) {
      const [method, path] = route.split(' ') as [string, string];
      const parameters = document.paths[path]![method.toLowerCase()]!.parameters ?? [];
      expect(
        parameters.some((p) => p.name === 'Idempotency-Key' && p.in === 'header'),
        route,
      ).toBe(true);
    }
  });

  it('each write repeated with its key is replayed once, and refused for another body', async () => {
    for (const route of routes) {
      const [method, template] = route.split(' ') as [Method, string];
      const prepared = await fixtures[route]!();
      const key = unique(`idem-${method}`);
      const entriesBefore = await auditEntries(method, template);

      const first = await call(method, prepared.url, prepared.body, { 'idempotency-key': key });
      expect(first.statusCode, `${route}: ${first.body}`).toBeLessThan(300);
      expect(first.headers['idempotent-replayed'], route).toBeUndefined();
      const effectsAfterFirst = await sideEffects();

      const repeat = await call(method, prepared.url, prepared.body, { 'idempotency-key': key });
      expect(repeat.statusCode, `${route}: ${repeat.body}`).toBe(first.statusCode);
      expect(repeat.headers['idempotent-replayed'], route).toBe('true');
      expect(repeat.body, route).toBe(first.body);
      expect(repeat.headers['content-type'], route).toBe(first.headers['content-type']);

      const other = await call(
        method,
        prepared.url,
        { ...prepared.body, probe: unique('other') },
        {
          'idempotency-key': key,
        },
      );
      expect(other.statusCode, `${route}: ${other.body}`).toBe(422);
      expect(other.json().error.code, route).toBe('IDEMPOTENCY_KEY_REUSED');

      expect(await auditEntries(method, template), `${route}: audit entries`).toBe(entriesBefore + 1);
      expect(await sideEffects(), `${route}: outbox and deliveries`).toBe(effectsAfterFirst);
    }
  });
});
