import type { LightMyRequestResponse } from 'fastify';
import type { AddressInfo } from 'node:net';
import type { Clock } from '@ent/common/clock';
import type { Config } from '@ent/common/config';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createAdminContext, createTestOrganization } from '../../test-support/admin-context.ts';
import { buildGatewayApp, type GatewayApp } from '../src/app.ts';

type Inject = (options: { method: string; url: string; headers?: Record<string, string>; payload?: unknown }) => Promise<{
  statusCode: number;
  json(): any; // eslint-disable-line @typescript-eslint/no-explicit-any
  headers: Record<string, unknown>;
}>;

/** The writes the read-your-writes tests make, through any client (inject or HTTP) of the one base URL. */
export function catalogClient(call: Inject, headers: Record<string, string>) {
  const send = async (method: string, url: string, payload?: unknown, expected?: number) => {
    const res = await call({ method, url, headers, ...(payload === undefined ? {} : { payload }) });
    if (expected !== undefined && res.statusCode !== expected) {
      throw new Error(`${method} ${url} -> ${res.statusCode}: ${JSON.stringify(res.json?.() ?? null)}`);
    }
    return res;
  };
  const client = {
    send,
    feature: (key: string, kind: 'flag' | 'limit' | 'metered') => send('POST', '/org/features', { key, name: key, kind }, 201),
    plan: (key: string, grants: unknown[]) => send('POST', '/org/plans', { key, name: key, kind: 'catalog', grants }, 201),
    grants: (key: string, grants: unknown[]) => send('PATCH', `/org/plans/${key}`, { grants }, 200),
    subscriber: (id: string) => send('POST', '/org/subscribers', { subscriber_id: id, name: id }, 201),
    subscribe: async (id: string, plan: string) =>
      (await send('POST', `/org/subscribers/${id}/subscriptions`, { plan_id: plan }, 201)).json().subscription_id as string,
    change: async (id: string, subscriptionId: string, plan: string) =>
      (await send('POST', `/org/subscribers/${id}/subscriptions/change`, { subscription_id: subscriptionId, plan_id: plan }, 201)).json()
        .subscription_id as string,
    cancel: (id: string, subscriptionId: string) =>
      send('POST', `/org/subscribers/${id}/subscriptions/${subscriptionId}/cancel`, undefined, 200),
    override: (id: string, feature: string, body: unknown) => send('PUT', `/org/subscribers/${id}/overrides/${feature}`, body, 200),
    deleteOverride: (id: string, feature: string) => send('DELETE', `/org/subscribers/${id}/overrides/${feature}`, undefined, 204),
    /** A metered feature with a monthly `limit`, granted by a plan of its own (`plan`) that `id`, made here, takes. */
    meteredSubscriber: async (id: string, feature: string, plan: string, limit: number) => {
      await client.feature(feature, 'metered');
      await client.plan(plan, [{ feature, kind: 'metered', limit, reset: 'month' }]);
      await client.subscriber(id);
      await client.subscribe(id, plan);
    },
  };
  return client;
}

export const injector =
  (app: GatewayApp): Inject =>
  async ({ method, url, headers, payload }) =>
    (await app.inject({ method: method as 'GET', url, headers, ...(payload === undefined ? {} : { payload: payload as object }) })) as LightMyRequestResponse;

/**
 * A gateway app in this process, forwarding to the test's admin app, which is made to listen on a free port
 * (the gateway reaches admin over HTTP, as in production). Close it before the admin context.
 */
export async function gatewayOverAdmin(
  ctx: { app: { listen(options: { host: string; port: number }): Promise<string>; server: { address(): unknown } }; config: Config },
  options: { clock?: Clock; config?: Partial<Config>; subscribeInvalidations?: boolean } = {},
): Promise<GatewayApp> {
  if (!ctx.app.server.address()) await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = ctx.app.server.address() as AddressInfo;
  const gateway = await buildGatewayApp({
    config: { ...ctx.config, adminUrl: `http://127.0.0.1:${port}`, ...options.config },
    clock: options.clock,
    logger: false,
    subscribeInvalidations: options.subscribeInvalidations,
  });
  await gateway.ready();
  return gateway;
}

/** sso (flag), seats (limit 25) and storage (unlimited) on plan `pro`, and `alice` subscribed to it. */
export async function seedProPlan(api: ReturnType<typeof catalogClient>): Promise<void> {
  await api.feature('sso', 'flag');
  await api.feature('seats', 'limit');
  await api.feature('storage', 'limit');
  await api.plan('pro', [
    { feature: 'sso', kind: 'flag' },
    { feature: 'seats', kind: 'limit', limit: 25 },
    { feature: 'storage', kind: 'limit', limit: null },
  ]);
  await api.subscriber('alice');
  await api.subscribe('alice', 'pro');
}

/**
 * An admin context, a gateway over it and an organization on an arrangement that blocks at 1,000 evals a month:
 * features sso (flag), seats (limit) and audit (flag), plans basic (3 seats) and pro (sso, 25 seats), subscribers
 * alice (on basic) and bob (on none), all written through the gateway. Close the gateway before the context.
 */
export async function gatewayWithCatalog(clock: Clock) {
  const ctx = await createAdminContext({ clock });
  const gateway = await gatewayOverAdmin(ctx, { clock });
  const org = await createTestOrganization(ctx.db, 'Gateway org');
  await saveArrangement(ctx.db, org.organization_id, {
    plan: 'free',
    evalLimit: 1000,
    blocking: true,
    burstPerSecond: 10_000,
  });
  const api = catalogClient(injector(gateway), org.headers);
  await api.feature('sso', 'flag');
  await api.feature('seats', 'limit');
  await api.feature('audit', 'flag');
  await api.plan('basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
  await api.plan('pro', [
    { feature: 'sso', kind: 'flag' },
    { feature: 'seats', kind: 'limit', limit: 25 },
  ]);
  await api.subscriber('alice');
  await api.subscribe('alice', 'basic');
  await api.subscriber('bob');
  return { ctx, gateway, org, api };
}
