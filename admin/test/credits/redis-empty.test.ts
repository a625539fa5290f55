import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

// Issue 35: credits survive a Redis that comes back empty. The loop: the worker persists, Redis loses the
// organization's metered state, a gateway refills, spending resumes exactly where it stopped.

const NOW = Date.parse('2027-03-15T12:00:00.000Z');

let env: GatewaysOverAdmin;
let ctx: AdminTestContext;
let org: TestOrganization;
const clock = new ManualClock(NOW);

beforeAll(async () => {
  env = await gatewaysOverAdmin({
    clock,
    organizationName: 'Credits after Redis',
    gateways: 2,
    gatewayConfig: { meteredRefillGatherMs: 0 },
  });
  ({ ctx, org } = env);
  await env.create(
    meteredPlanRequests('alice', 'base', [
      { feature: 'calls', limit: 10 },
      { feature: 'tokens', limit: 100, rollover: { max: 50 } },
    ]),
  );
});
afterAll(() => env?.close());

const check = (gateway: number, feature: string, body: object = {}) =>
  env.check(gateway, 'alice', feature, body);
const persist = async () => {
  // A gateway names the organization for the worker within 100 ms of a change (not at once after another mark).
  await ctx.redis.sadd(ctx.app.redisKeys.meteredDirtyOrganizations, org.organization_id);
  const result = await createMeteredPersister(meteredPersisterDeps(ctx)).persistOnce();
  expect(result.failed).toBe(0);
};
/** Redis loses the organization's metered state: balances, credit-spent hashes, the dirty set and the ready mark. */
const emptyRedis = async () => {
  const keys = ctx.app.redisKeys;
  const doomed = [keys.meteredReady(org.organization_id), keys.meteredDirty(org.organization_id)];
  for (const pattern of [
    keys.meteredBalance(org.organization_id, '*'),
    keys.creditSpent(org.organization_id, '*', '*'),
  ])
    doomed.push(...(await ctx.redis.keys(pattern)));
  await ctx.redis.del(...doomed);
};
const persisted = async () => ({
  credits: Object.fromEntries(
    (
      await ctx.db
        .selectFrom('credits as c')
        .select(['c.id', creditSpentNow])
        .where('c.organization_id', '=', org.organization_id)
        .execute()
    ).map((row) => [row.id, row.spent]),
  ),
  balances: await ctx.db
    .selectFrom('metered_usage')
    .select(['feature_key', 'used', 'covered', 'rollover'])
    .where('organization_id', '=', org.organization_id)
    .orderBy('feature_key')
    .orderBy('period_start')
    .execute(),
});

describe('credits after Redis comes back empty', () => {
  it('persist, lose Redis, refill: what credits covered and spent is back, and spending resumes where it stopped', async () => {
    const promotion = (
      await env.api.post('/org/subscribers/alice/credits', { feature: 'calls', amount: 5, priority: 5 })
    ).json().credit_id as string;
    const topUp = (
      await env.api.post('/org/subscribers/alice/credits', { feature: 'calls', amount: 8 })
    ).json().credit_id as string;
    // The allowance (10), then 2 of the promotion.
    expect(await check(0, 'calls', { consume: 12 })).toMatchObject({
      allowed: true,
      used: 12,
      remaining: 11,
    });
    await persist();
    expect(await persisted()).toMatchObject({
      credits: { [promotion]: 2, [topUp]: 0 },
      balances: [{ feature_key: 'calls', used: 12, covered: 2, rollover: 0 }],
    });

    await emptyRedis();
    // The other gateway, which never saw the figures, refills from Postgres alone.
    expect(await check(1, 'calls')).toMatchObject({
      used: 12,
      remaining: 11,
      credits: [
        { credit_id: promotion, remaining: 3 },
        { credit_id: topUp, remaining: 8 },
      ],
    });
    expect(await check(1, 'calls', { consume: 4 })).toMatchObject({
      allowed: true,
      used: 16,
      remaining: 7,
      credits: [{ credit_id: topUp, remaining: 7 }],
    });
    expect(await check(0, 'calls', { consume: 8 })).toMatchObject({ allowed: false, used: 16, remaining: 7 });
    await persist();
    expect(await persisted()).toMatchObject({
      credits: { [promotion]: 5, [topUp]: 1 },
      balances: [{ feature_key: 'calls', used: 16, covered: 6 }],
    });
  });

  it("the refilling gateway's own figures, newer than the worker's, win with their credits", async () => {
    const before = await check(0, 'calls');
    const [topUp] = before.credits;
    // Spent on gateway 0 and lost with Redis before any worker pass.
    expect(await check(0, 'calls', { consume: 3 })).toMatchObject({ used: before.used + 3 });
    await emptyRedis();
    expect(await check(0, 'calls')).toMatchObject({
      used: before.used + 3,
      remaining: before.remaining! - 3,
      credits: [{ credit_id: topUp!.credit_id, remaining: topUp!.remaining - 3 }],
    });
    await persist();
    expect((await persisted()).credits[topUp!.credit_id]).toBe(4);
  });

  it('a rollover grant: the period that ended is back for the rollover, and the rollover itself is kept', async () => {
    expect(await check(0, 'tokens', { consume: 70 })).toMatchObject({ remaining: 80 });
    await persist();
    clock.set(Date.parse('2027-04-02T00:00:00Z'));
    // Redis lost everything before April's first touch: March's 30 left must still roll over, not the max.
    await emptyRedis();
    const april = await check(1, 'tokens', { consume: 110 });
    expect(april).toMatchObject({ allowed: true, used: 110, remaining: 20, credits: [{ remaining: 20 }] });
    await persist();
    await emptyRedis();
    expect(await check(0, 'tokens')).toMatchObject({
      used: 110,
      remaining: 20,
      credits: [{ remaining: 20 }],
    });
    expect(await check(0, 'tokens', { consume: 21 })).toMatchObject({ allowed: false });
    const { balances } = await persisted();
    expect(balances.filter((b) => b.feature_key === 'tokens')).toEqual([
      { feature_key: 'tokens', used: 70, covered: 0, rollover: 50 },
      { feature_key: 'tokens', used: 110, covered: 10, rollover: 30 },
    ]);
  });
});
