import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { saveArrangement } from '@ent/common/metering/arrangement';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createMeteredPersister } from '../../../admin/src/features/metered-usage/persister.ts';
import { catalogClient, gatewayOverAdmin, injector } from '../helpers.ts';
import type { GatewayApp } from '../../src/app.ts';

/**
 * A period boundary of the app clock, end to end in one process (the process tests cannot move their clock): the
 * catalog made through a gateway, consumes on two gateways, the worker's persister writing Postgres, and the past
 * period read back through the API with its final figure.
 */
const clock = new ManualClock(Date.parse('2026-01-31T23:58:00Z'));
let ctx: AdminTestContext;
const gateways: GatewayApp[] = [];
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  gateways.push(await gatewayOverAdmin(ctx, { clock }), await gatewayOverAdmin(ctx, { clock }));
  org = await createTestOrganization(ctx.db, 'Metered periods');
  await saveArrangement(ctx.db, org.organization_id, {
    plan: null,
    evalLimit: null,
    blocking: false,
    burstPerSecond: 100_000,
  });
}, 60_000);

afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  await ctx?.close();
});

describe('a period boundary through the API, with the persister', () => {
  it('starts the new period at 0 on both gateways and lists the month just ended with its final figure', async () => {
    const [a, b] = gateways.map(injector) as [ReturnType<typeof injector>, ReturnType<typeof injector>];
    const api = catalogClient(a, org.headers);
    await api.meteredSubscriber('ann', 'calls', 'monthly', 5);
    const consume = (call: typeof a, n: number) =>
      call({
        method: 'POST',
        url: '/org/subscribers/ann/entitlements/check',
        headers: org.headers,
        payload: { feature: 'calls', consume: n },
      });
    const persister = createMeteredPersister({
      db: ctx.db,
      redis: ctx.redis,
      redisKeys: ctx.app.redisKeys,
      clock,
      queues: ctx.app.queues,
      log: { warn: () => undefined, error: () => undefined },
    });

    expect((await consume(a, 3)).json()).toMatchObject({ used: 3, allowed: true });
    expect((await consume(b, 2)).json()).toMatchObject({
      used: 5,
      allowed: true,
      period_start: '2026-01-01T00:00:00.000Z',
      resets_at: '2026-02-01T00:00:00.000Z',
    });
    expect((await consume(a, 1)).json()).toMatchObject({ used: 5, allowed: false });
    await persister.persistOnce();

    clock.set(Date.parse('2026-02-01T00:00:00Z'));
    expect((await consume(b, 1)).json()).toMatchObject({
      used: 1,
      allowed: true,
      period_start: '2026-02-01T00:00:00.000Z',
      resets_at: '2026-03-01T00:00:00.000Z',
    });
    expect((await consume(a, 4)).json()).toMatchObject({ used: 5, allowed: true });
    await persister.persistOnce();

    for (const call of [a, b]) {
      const periods = await call({
        method: 'GET',
        url: '/org/subscribers/ann/usage/calls/periods',
        headers: org.headers,
      });
      expect(periods.statusCode).toBe(200);
      expect(periods.json().periods).toEqual([
        {
          feature: 'calls',
          period_start: '2026-01-01T00:00:00.000Z',
          period_end: '2026-02-01T00:00:00.000Z',
          used: 5,
        },
      ]);
      const usage = await call({ method: 'GET', url: '/org/subscribers/ann/usage', headers: org.headers });
      expect(usage.json().usage).toEqual([
        expect.objectContaining({ used: 5, period_start: '2026-02-01T00:00:00.000Z' }),
      ]);
    }
  }, 60_000);

  it('keeps a subscription-anchored period and its usage when the subscriber moves to another plan', async () => {
    const [a, b] = gateways.map(injector) as [ReturnType<typeof injector>, ReturnType<typeof injector>];
    const api = catalogClient(b, org.headers);
    const anchored = { feature: 'calls', kind: 'metered', reset: 'month', reset_anchor: 'subscription' };
    await api.plan('anchored-small', [{ ...anchored, limit: 4 }]);
    await api.plan('anchored-large', [{ ...anchored, limit: 40 }]);
    await api.subscriber('bea');
    const subscription = await api.subscribe('bea', 'anchored-small');
    clock.set(Date.now() + 1000);
    const consume = (call: typeof a, n: number) =>
      call({
        method: 'POST',
        url: '/org/subscribers/bea/entitlements/check',
        headers: org.headers,
        payload: { feature: 'calls', consume: n },
      });
    // The anchor is the subscription's creation as Postgres stamps it (now()), not the app clock: read it back.
    const first = (await consume(a, 3)).json();
    expect(first).toMatchObject({ used: 3 });
    const anchoredPeriod = {
      period_start: first.period_start as string,
      resets_at: first.resets_at as string,
    };
    expect(Date.parse(anchoredPeriod.resets_at) - Date.parse(anchoredPeriod.period_start)).toBeGreaterThan(
      27 * 86_400_000,
    );

    clock.advance(3 * 86_400_000);
    await api.change('bea', subscription, 'anchored-large');
    for (const call of [a, b]) {
      expect((await consume(call, 1)).json()).toMatchObject({
        limit: 40,
        allowed: true,
        ...anchoredPeriod,
      });
    }
    expect((await consume(a, 1)).json()).toMatchObject({ used: 6 });
  }, 60_000);
});
