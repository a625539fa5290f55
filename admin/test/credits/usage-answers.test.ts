import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
import { currentUsage } from '../../src/features/metered-usage/current-usage.ts';
import { createMeteredPersister } from '../../src/features/metered-usage/persister.ts';

// Issue 35: admin's usage answers (the correction's, entctl's usage read) list the live credits exactly as the
// gateway's check result does: same code (common/src/metering/credit-answer.ts), same figures.

const NOW = Date.parse('2027-03-15T12:00:00.000Z');

let env: GatewaysOverAdmin;
let ctx: AdminTestContext;
let org: TestOrganization;
const clock = new ManualClock(NOW);

beforeAll(async () => {
  env = await gatewaysOverAdmin({ clock, organizationName: 'Credits in usage answers', gateways: 1 });
  ({ ctx, org } = env);
  await env.create([
    ...meteredPlanRequests('alice', 'base', [
      { feature: 'calls', limit: 10 },
      { feature: 'tokens', limit: 100, rollover: { max: 50 } },
    ]),
    ['/org/subscribers/alice/credits', { feature: 'calls', amount: 5, priority: 5 }],
    ['/org/subscribers/alice/credits', { feature: 'calls', amount: 8, expires_at: '2027-12-01T00:00:00Z' }],
    ['/org/subscribers/alice/credits', { feature: 'calls', amount: 4, effective_at: '2027-06-01T00:00:00Z' }],
  ]);
});
afterAll(() => env?.close());

const check = (feature: string, body: object = {}) => env.check(0, 'alice', feature, body);
const read = () =>
  currentUsage(
    { db: ctx.db, redis: ctx.redis, keys: ctx.app.redisKeys },
    org.organization_id,
    'alice',
    clock.now(),
  );
const usageOf = async (feature: string) =>
  (await read()).body.usage.find((usage) => usage.feature === feature)!;
const correct = (used: number) =>
  ctx.app.inject({
    method: 'PUT',
    url: '/org/subscribers/alice/usage/calls',
    headers: org.headers,
    payload: { used },
  });

describe("admin's usage answers list credits as the check result does", () => {
  it('the usage read and the correction answer the live credits, remaining per credit, counted in remaining', async () => {
    // The allowance (10), then 2 of the promotion; the scheduled credit is not live yet.
    await check('calls', { consume: 12 });
    const checked = await check('calls');
    expect(checked).toMatchObject({ used: 12, remaining: 11 });
    expect(checked.credits).toEqual([
      expect.objectContaining({ remaining: 3, expires_at: null }),
      expect.objectContaining({ remaining: 8, expires_at: '2027-12-01T00:00:00.000Z' }),
    ]);
    expect(await usageOf('calls')).toEqual(checked);

    // Down to 1: below what the credits covered (2), so both units go back to the promotion.
    const corrected = await correct(1);
    expect(corrected.statusCode, corrected.body).toBe(200);
    const after = await check('calls');
    expect(after).toMatchObject({ used: 1, remaining: 9 + 5 + 8 });
    expect(corrected.json()).toEqual(after);
    expect(await usageOf('calls')).toEqual(after);
  });

  it("without Redis's figures, the usage read lists the credits from what the worker persisted", async () => {
    await check('calls', { consume: 13 });
    const checked = await check('calls');
    expect(checked).toMatchObject({ used: 14, remaining: 9 + 5 + 8 - 13 });
    await ctx.redis.sadd(ctx.app.redisKeys.meteredDirtyOrganizations, org.organization_id);
    expect((await createMeteredPersister(meteredPersisterDeps(ctx)).persistOnce()).failed).toBe(0);
    const keys = ctx.app.redisKeys;
    await ctx.redis.del(
      ...(await ctx.redis.keys(keys.meteredBalance(org.organization_id, '*'))),
      keys.creditSpent(org.organization_id, 'alice', 'calls'),
    );
    expect(await usageOf('calls')).toEqual(checked);
  });

  it("a correction spends and gives back as a report's set does: the allowance, then the credits, back in reverse", async () => {
    // Issue 35, found by a probe: a correction up left the credits unspent (a consume could then pass the allowance
    // plus the credits), and a correction down gave back to the allowance before the credits.
    await env.create([
      ['/org/subscribers', { subscriber_id: 'bob' }],
      ['/org/subscribers/bob/subscriptions', { plan_id: 'base' }],
      ['/org/subscribers/bob/credits', { feature: 'calls', amount: 1, priority: 1 }],
      ['/org/subscribers/bob/credits', { feature: 'calls', amount: 3, priority: 2 }],
    ]);
    const correctBob = (used: number) =>
      ctx.app.inject({
        method: 'PUT',
        url: '/org/subscribers/bob/usage/calls',
        headers: org.headers,
        payload: { used },
      });
    const remainingOf = (answer: { credits: { remaining: number }[] }) =>
      answer.credits.map((credit) => credit.remaining);

    // Up to 12: the allowance's 10, then the first credit's 1 and 1 of the second.
    const up = await correctBob(12);
    expect(up.statusCode, up.body).toBe(200);
    expect(up.json()).toMatchObject({ used: 12, remaining: 2 });
    expect(remainingOf(up.json())).toEqual([2]);
    expect(await env.check(0, 'bob', 'calls')).toEqual(up.json());
    expect(await env.check(0, 'bob', 'calls', { consume: 3 })).toMatchObject({ allowed: false, used: 12 });
    expect(await env.check(0, 'bob', 'calls', { consume: 2 })).toMatchObject({ allowed: true, remaining: 0 });

    // Down to 11: the second credit, spent last, gets its 3 back; down to 9: the first credit its 1, then the allowance.
    const down = await correctBob(11);
    expect(down.json()).toMatchObject({ used: 11, remaining: 3 });
    expect(remainingOf(down.json())).toEqual([3]);
    const below = await correctBob(9);
    expect(below.json()).toMatchObject({ used: 9, remaining: 1 + 1 + 3 });
    expect(remainingOf(below.json())).toEqual([1, 3]);
  });

  it('a correction on a Redis that lost the organization starts from every persisted figure, credits included', async () => {
    await env.create([
      ['/org/subscribers', { subscriber_id: 'carol' }],
      ['/org/subscribers/carol/subscriptions', { plan_id: 'base' }],
      ['/org/subscribers/carol/credits', { feature: 'calls', amount: 10, priority: 1 }],
    ]);
    // 15: the allowance's 10 and 5 of the credit, persisted by the worker; then Redis loses the organization.
    expect(await env.check(0, 'carol', 'calls', { consume: 15 })).toMatchObject({ used: 15, remaining: 5 });
    await ctx.redis.sadd(ctx.app.redisKeys.meteredDirtyOrganizations, org.organization_id);
    expect((await createMeteredPersister(meteredPersisterDeps(ctx)).persistOnce()).failed).toBe(0);
    const keys = ctx.app.redisKeys;
    await ctx.redis.del(
      ...(await ctx.redis.keys(keys.meteredBalance(org.organization_id, '*'))),
      ...(await ctx.redis.keys(`${keys.creditSpentPrefix(org.organization_id)}*`)),
      keys.meteredReady(org.organization_id),
    );
    // Up by 5 before any gateway refilled: the credit's last 5, not the 5 it had already given spent again.
    const corrected = await ctx.app.inject({
      method: 'PUT',
      url: '/org/subscribers/carol/usage/calls',
      headers: org.headers,
      payload: { used: 20 },
    });
    expect(corrected.statusCode, corrected.body).toBe(200);
    expect(corrected.json()).toMatchObject({ used: 20, remaining: 0 });
    const member = (await ctx.redis.keys(keys.meteredBalance(org.organization_id, 'carol|calls|*')))[0]!;
    expect(await ctx.redis.hmget(member, 'u', 'k')).toEqual(['20', '10']);
    expect(
      Object.values(await ctx.redis.hgetall(keys.creditSpent(org.organization_id, 'carol', 'calls'))),
    ).toEqual(['10']);
    // Still before any refill, Postgres holding 15: a correction below it, then another. The second starts from the
    // first's figure (what Redis holds is newer than what Postgres holds), not from Postgres's raised back over it.
    const correctCarol = (used: number) =>
      ctx.app.inject({
        method: 'PUT',
        url: '/org/subscribers/carol/usage/calls',
        headers: org.headers,
        payload: { used },
      });
    expect((await correctCarol(12)).statusCode).toBe(200);
    const second = await correctCarol(13);
    expect(second.statusCode).toBe(200);
    expect(await ctx.redis.hget(member, 'u')).toBe('13');
    const entries = await ctx.app.inject({
      method: 'GET',
      url: '/org/audit-events?limit=1',
      headers: org.headers,
    });
    expect(entries.json().audit_events[0].details).toMatchObject({ used: { from: 12, to: 13 } });
    // The gateways merge their own figures and mark the organization ready; this test stands in for them.
    await ctx.redis.set(keys.meteredReady(org.organization_id), '1');
  });

  it("a rollover grant's period lists its rollover credit as the check does", async () => {
    clock.set(Date.parse('2027-04-02T00:00:00Z'));
    const checked = await check('tokens', { consume: 120 });
    expect(checked.credits).toEqual([expect.objectContaining({ remaining: 30 })]);
    expect(await usageOf('tokens')).toEqual(await check('tokens'));
  });
});
