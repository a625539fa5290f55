import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminContext, createTestOrganization, type AdminTestContext, type TestOrganization } from '../../../test-support/admin-context.ts';
import { buildGatewayApp, type GatewayApp } from '../../src/app.ts';

const TOKEN = 'gateway-admin-shared-token';
let ctx: AdminTestContext;
let org: TestOrganization;
const gateways: GatewayApp[] = [];

beforeAll(async () => {
  ctx = await createAdminContext({ config: { internalToken: TOKEN } });
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  org = await createTestOrganization(ctx.db, 'Token org');
});
afterAll(async () => {
  await Promise.all(gateways.map((gateway) => gateway.close()));
  await ctx?.close();
});

async function gatewayWith(internalToken: string): Promise<GatewayApp> {
  const { port } = ctx.app.server.address() as AddressInfo;
  const gateway = await buildGatewayApp({
    config: { ...ctx.config, internalToken, adminUrl: `http://127.0.0.1:${port}` },
    logger: false,
  });
  gateways.push(gateway);
  await gateway.ready();
  return gateway;
}

// A key the gateway has not seen yet: it must ask admin's /internal routes.
const firstEval = (gateway: GatewayApp) =>
  gateway.inject({ method: 'GET', url: '/org/subscribers/nobody/entitlements', headers: org.headers });

describe('gateway presenting INTERNAL_TOKEN to admin', () => {
  it('with the same token, resolves a key through admin', async () => {
    const res = await firstEval(await gatewayWith(TOKEN));
    expect(res.statusCode, res.body).not.toBe(401);
    expect(res.statusCode).toBeLessThan(500);
  });

  it('with another token or none, answers 503 (admin refused), never 401 as if the key were unknown', async () => {
    for (const token of ['a-different-token', '']) {
      // Its own organization: a key no gateway has resolved yet, so none of it is in Redis.
      const fresh = await createTestOrganization(ctx.db, `Token org ${token || 'none'}`);
      const gateway = await gatewayWith(token);
      const res = await gateway.inject({ method: 'GET', url: '/org/subscribers/nobody/entitlements', headers: fresh.headers });
      expect(res.statusCode, `${JSON.stringify(token)}: ${res.body}`).toBe(503);
    }
  });
});
