import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminContext, type AdminTestContext } from '../../../test-support/admin-context.ts';
import { joinWithRole, signUp } from '../../../admin/test/console-sessions/browser.ts';
import type { GatewayApp } from '../../src/app.ts';
import { catalogClient, gatewayOverAdmin, injector, seedProPlan } from '../helpers.ts';

let ctx: AdminTestContext;
const gateways: GatewayApp[] = [];

beforeAll(async () => {
  ctx = await createAdminContext();
  // Two gateways, each with its own memory of keys: both must refuse at once, as gateways on other hosts would.
  gateways.push(await gatewayOverAdmin(ctx), await gatewayOverAdmin(ctx));
});
afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  await ctx?.close();
});

describe('offboarding on the gateways', () => {
  it("refuses a removed member's minted key on the very next request on every gateway (evals and writes)", async () => {
    const admin = await signUp(ctx, 'gw-offboard');
    const developer = await joinWithRole(ctx, admin, 'developer');
    const account = await developer.call('POST', '/org/service-accounts', {
      name: 'laptop',
      role: 'developer',
    });
    expect(account.statusCode, account.body).toBe(201);
    const minted = await developer.call(
      'POST',
      `/org/service-accounts/${account.json().service_account_id}/api-keys`,
      { scopes: [] },
    );
    expect(minted.statusCode, minted.body).toBe(201);
    const headers = { 'x-api-key': minted.json().api_key as string };
    await seedProPlan(catalogClient(injector(gateways[0]!), headers));
    const check = (gateway: GatewayApp) =>
      gateway.inject({
        method: 'POST',
        url: '/org/subscribers/alice/entitlements/check',
        headers,
        payload: { feature: 'sso' },
      });
    // Each gateway has confirmed the key and holds it in memory.
    for (const gateway of gateways) expect((await check(gateway)).statusCode).toBe(200);

    const removal = await admin.call('PATCH', `/org/members/${developer.memberId}`, { status: 'removed' });
    expect(removal.statusCode, removal.body).toBe(200);

    for (const gateway of gateways) {
      const res = await check(gateway);
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('UNAUTHENTICATED');
      const write = await gateway.inject({
        method: 'POST',
        url: '/org/features',
        headers,
        payload: { key: 'after', name: 'after', kind: 'flag' },
      });
      expect(write.statusCode).toBe(401);
    }
  });
});
