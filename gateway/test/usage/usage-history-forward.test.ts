import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
} from '../../../test-support/admin-context.ts';
import type { GatewayApp } from '../../src/app.ts';
import { gatewayOverAdmin } from '../helpers.ts';

/** GET /org/usage/history is admin's (beyond SPEC.md): the gateway forwards it like every non-eval route. */
const clock = new ManualClock(Date.UTC(2031, 4, 10, 12, 0, 0, 0));
let ctx: AdminTestContext;
let gateway: GatewayApp;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  gateway = await gatewayOverAdmin(ctx, { clock });
});
afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

describe('GET /org/usage/history through the gateway', () => {
  it("answers admin's history, with the query, scope and validation admin applies", async () => {
    const org = await createTestOrganization(ctx.db, 'Forwarded history');
    await ctx.db
      .insertInto('usage_days')
      .values({
        organization_id: org.organization_id,
        day: '2031-04-30',
        period: '2031-04',
        count: 77,
        eval_limit: 250_000,
      })
      .execute();
    await ctx.redis.hset(ctx.app.redisKeys.evalUsage(org.organization_id, '2031-05'), 'count', 5);
    const get = (url: string, headers = org.headers) => gateway.inject({ method: 'GET', url, headers });

    const res = await get('/org/usage/history?months=2');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      months: [
        { period: '2031-05', count: 5, limit: 250_000, days: [{ date: '2031-05-10', count: 5 }] },
        { period: '2031-04', count: 77, limit: 250_000, days: [{ date: '2031-04-30', count: 77 }] },
      ],
    });
    expect((await get('/org/usage/history?months=1')).json().months).toHaveLength(1);
    expect((await get('/org/usage/history?months=99')).statusCode).toBe(422);
    const checkOnly = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    expect((await get('/org/usage/history', { 'x-api-key': checkOnly.apiKey })).statusCode).toBe(403);
    // The neighbouring route is unchanged.
    expect((await get('/org/usage/current')).json()).toMatchObject({ period: '2031-05', count: 5 });
  });
});
