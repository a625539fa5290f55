import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveArrangement } from '@ent/common/metering/arrangement';
import type { GatewayApp } from '../../../gateway/src/app.ts';
import { gatewayOverAdmin, injector } from '../../../gateway/test/helpers.ts';
import {
  ManualClock,
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import {
  createMeteredPersister,
  type MeteredPersisterDeps,
} from '../../src/features/metered-usage/persister.ts';

const NOW = Date.parse('2027-03-15T12:00:00.000Z');

let ctx: AdminTestContext;
let org: TestOrganization;
const gateways: GatewayApp[] = [];
const clock = new ManualClock(NOW);

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  for (let i = 0; i < 2; i++) gateways.push(await gatewayOverAdmin(ctx, { clock }));
  org = await createTestOrganization(ctx.db, 'Credits e2e');
  await saveArrangement(ctx.db, org.organization_id, {
    plan: 'free',
    evalLimit: 1_000_000,
    blocking: true,
    burstPerSecond: 10_000,
  });
  for (const [url, payload] of [
    ['/org/features', { key: 'calls', name: 'Calls', kind: 'metered' }],
    [
      '/org/plans',
      {
        key: 'base',
        name: 'Base',
        kind: 'catalog',
        grants: [{ feature: 'calls', kind: 'metered', limit: 10 }],
      },
    ],
    ['/org/subscribers', { subscriber_id: 'alice' }],
    ['/org/subscribers/alice/subscriptions', { plan_id: 'base' }],
  ] as const) {
    const res = await admin('POST', url, payload);
    expect(res.statusCode, res.body).toBe(201);
  }
});
afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  await ctx?.close();
});

const admin = (method: 'POST' | 'GET' | 'DELETE', url: string, payload?: object) =>
  ctx.app.inject({ method, url, headers: org.headers, ...(payload ? { payload } : {}) });
const check = async (gateway: number, body: object) => {
  const res = await injector(gateways[gateway]!)({
    method: 'POST',
    url: '/org/subscribers/alice/entitlements/check',
    headers: org.headers,
    payload: { feature: 'calls', ...body },
  });
  expect(res.statusCode, JSON.stringify(res.json())).toBe(200);
  return res.json() as { allowed: boolean; remaining: number | null; credits: unknown[]; used: number };
};

describe('credits end to end: admin writes, every gateway reads its writes, the worker persists', () => {
  it('a POST is seen by the next check on either gateway, spent after the allowance, voided likewise', async () => {
    // Both gateways hold alice's document before the credit exists.
    for (const gateway of [0, 1])
      expect(await check(gateway, {})).toMatchObject({ remaining: 10, credits: [] });
    const created = await admin('POST', '/org/subscribers/alice/credits', { feature: 'calls', amount: 5 });
    expect(created.statusCode).toBe(201);
    const creditId = created.json().credit_id as string;
    for (const gateway of [1, 0]) {
      expect(await check(gateway, {})).toMatchObject({
        remaining: 15,
        credits: [{ credit_id: creditId, remaining: 5, expires_at: null }],
      });
    }
    expect(await check(0, { consume: 12 })).toMatchObject({
      allowed: true,
      remaining: 3,
      credits: [{ credit_id: creditId, remaining: 3 }],
    });
    const deps: MeteredPersisterDeps = {
      db: ctx.db,
      redis: ctx.redis,
      redisKeys: ctx.app.redisKeys,
      clock,
      queues: ctx.app.queues,
      log: { warn: () => {}, error: () => {} },
    };
    expect((await createMeteredPersister(deps).persistOnce()).failed).toBe(0);
    const row = await ctx.db
      .selectFrom('credits')
      .select('spent')
      .where('organization_id', '=', org.organization_id)
      .where('id', '=', creditId)
      .executeTakeFirstOrThrow();
    expect(row.spent).toBe(2);
    const voided = await admin('DELETE', `/org/subscribers/alice/credits/${creditId}`);
    expect(voided.json()).toMatchObject({ status: 'voided', spent: 2, remaining: 0 });
    for (const gateway of [1, 0])
      expect(await check(gateway, {})).toMatchObject({ remaining: 0, credits: [] });
    expect(await check(1, { consume: 1 })).toMatchObject({ allowed: false });
  });

  it('a rollover grant: March leftover becomes an April credit, recorded once by the worker', async () => {
    for (const [url, payload] of [
      ['/org/features', { key: 'tokens', name: 'Tokens', kind: 'metered' }],
      [
        '/org/plans',
        {
          key: 'roll',
          name: 'Roll',
          kind: 'catalog',
          grants: [{ feature: 'tokens', kind: 'metered', limit: 100, rollover: { max: 50 } }],
        },
      ],
      ['/org/subscribers', { subscriber_id: 'bob' }],
      ['/org/subscribers/bob/subscriptions', { plan_id: 'roll' }],
    ] as const) {
      const res = await admin('POST', url, payload);
      expect(res.statusCode, res.body).toBe(201);
    }
    const bobCheck = async (gateway: number, body: object) => {
      const res = await injector(gateways[gateway]!)({
        method: 'POST',
        url: '/org/subscribers/bob/entitlements/check',
        headers: org.headers,
        payload: { feature: 'tokens', ...body },
      });
      expect(res.statusCode, JSON.stringify(res.json())).toBe(200);
      return res.json() as { remaining: number | null; credits: { credit_id: string; remaining: number }[] };
    };
    // The subscription began before March (its anchor is the database's clock), so February's allowance, never
    // used, rolls over into March up to the max: 50 more.
    clock.set(Date.parse('2027-03-20T00:00:00Z'));
    expect(await bobCheck(0, { consume: 70 })).toMatchObject({ remaining: 80 });
    clock.set(Date.parse('2027-04-02T00:00:00Z'));
    const [first, second] = await Promise.all([bobCheck(0, {}), bobCheck(1, {})]);
    expect(first).toMatchObject({ remaining: 130, credits: [{ remaining: 30 }] });
    expect(second.credits).toEqual(first.credits);
    const deps: MeteredPersisterDeps = {
      db: ctx.db,
      redis: ctx.redis,
      redisKeys: ctx.app.redisKeys,
      clock,
      queues: ctx.app.queues,
      log: { warn: () => {}, error: () => {} },
    };
    await Promise.all([
      createMeteredPersister(deps).persistOnce(),
      createMeteredPersister(deps).persistOnce(),
    ]);
    const all = await admin('GET', '/org/subscribers/bob/credits');
    expect(all.json().credits.map((c: { status: string; amount: number }) => [c.status, c.amount])).toEqual([
      ['active', 30],
      ['expired', 50],
    ]);
    const listed = await admin('GET', '/org/subscribers/bob/credits?status=active');
    expect(listed.json().credits).toEqual([
      expect.objectContaining({
        credit_id: first.credits[0]!.credit_id,
        source: 'rollover',
        amount: 30,
        remaining: 30,
        status: 'active',
        effective_at: '2027-04-01T00:00:00.000Z',
        expires_at: '2027-05-01T00:00:00.000Z',
      }),
    ]);
  });
});
