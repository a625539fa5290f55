import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { creditSpentNow } from '@ent/common/db/credit-columns';
import {
  ManualClock,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import {
  gatewaysOverAdmin,
  meteredPlanRequests,
  type GatewaysOverAdmin,
} from '../../../test-support/gateways-over-admin.ts';
import { meteredPersisterDeps } from '../../../test-support/metered-persister.ts';
import { createMeteredPersister } from '../../src/features/metered-usage/persister.ts';

const NOW = Date.parse('2027-03-15T12:00:00.000Z');

let env: GatewaysOverAdmin;
let ctx: AdminTestContext;
let org: TestOrganization;
const clock = new ManualClock(NOW);

beforeAll(async () => {
  env = await gatewaysOverAdmin({ clock, organizationName: 'Credits e2e', gateways: 2 });
  ({ ctx, org } = env);
  await env.create(meteredPlanRequests('alice', 'base', [{ feature: 'calls', limit: 10 }]));
});
afterAll(() => env?.close());

/**
 * A gateway names a changed organization in `mdirty-orgs` at once after a quiet spell, else up to 100 ms later (one
 * mark per interval, metered-balances.ts): the worker's pass after the mark finds the change. The test's pass may come
 * sooner, so it waits for the mark rather than racing it (it failed so in one full run of the suite).
 */
const organizationMarkedDirty = () =>
  vi.waitFor(
    async () =>
      expect(await ctx.redis.sismember(ctx.app.redisKeys.meteredDirtyOrganizations, org.organization_id)).toBe(1),
    { timeout: 5_000 },
  );

const check = (gateway: number, body: object) => env.check(gateway, 'alice', 'calls', body);

describe('credits end to end: admin writes, every gateway reads its writes, the worker persists', () => {
  it('a POST is seen by the next check on either gateway, spent after the allowance, voided likewise', async () => {
    // Both gateways hold alice's document before the credit exists.
    for (const gateway of [0, 1])
      expect(await check(gateway, {})).toMatchObject({ remaining: 10, credits: [] });
    const created = await env.api.post('/org/subscribers/alice/credits', {
      feature: 'calls',
      amount: 5,
    });
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
    const deps = meteredPersisterDeps(ctx);
    await organizationMarkedDirty();
    expect((await createMeteredPersister(deps).persistOnce()).failed).toBe(0);
    const row = await ctx.db
      .selectFrom('credits as c')
      .select(creditSpentNow)
      .where('c.organization_id', '=', org.organization_id)
      .where('c.id', '=', creditId)
      .executeTakeFirstOrThrow();
    expect(row.spent).toBe(2);
    const voided = await env.api.delete(`/org/subscribers/alice/credits/${creditId}`);
    expect(voided.json()).toMatchObject({ status: 'voided', spent: 2, remaining: 0 });
    for (const gateway of [1, 0])
      expect(await check(gateway, {})).toMatchObject({ remaining: 0, credits: [] });
    expect(await check(1, { consume: 1 })).toMatchObject({ allowed: false });
  });

  it('a rollover grant: March leftover becomes an April credit, recorded once by the worker', async () => {
    await env.create(
      meteredPlanRequests('bob', 'roll', [{ feature: 'tokens', limit: 100, rollover: { max: 50 } }]),
    );
    const bobCheck = (gateway: number, body: object) => env.check(gateway, 'bob', 'tokens', body);
    // The subscription began before March (its anchor is the database's clock), so February's allowance, never
    // used, rolls over into March up to the max: 50 more.
    clock.set(Date.parse('2027-03-20T00:00:00Z'));
    expect(await bobCheck(0, { consume: 70 })).toMatchObject({ remaining: 80 });
    clock.set(Date.parse('2027-04-02T00:00:00Z'));
    const [first, second] = await Promise.all([bobCheck(0, {}), bobCheck(1, {})]);
    expect(first).toMatchObject({ remaining: 130, credits: [{ remaining: 30 }] });
    expect(second.credits).toEqual(first.credits);
    const deps = meteredPersisterDeps(ctx);
    await organizationMarkedDirty();
    await Promise.all([
      createMeteredPersister(deps).persistOnce(),
      createMeteredPersister(deps).persistOnce(),
    ]);
    const all = await env.api.get('/org/subscribers/bob/credits');
    expect(all.json().credits.map((c: { status: string; amount: number }) => [c.status, c.amount])).toEqual([
      ['active', 30],
      ['expired', 50],
    ]);
    const listed = await env.api.get('/org/subscribers/bob/credits?status=active');
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
