import { describe, expect, it } from 'vitest';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { planSuite } from './fixtures.ts';

const suite = planSuite();

type World = Awaited<ReturnType<typeof suite.world>>;
type PlanJson = { key: string; subscriber_count?: number };

/** Subscribers made through the API, each subscribed to `plan`; returns their subscription ids. */
async function subscribers(world: World, plan: string, count: number, prefix: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const subscriberId = `${prefix}-${plan}-${i}`;
    expect((await world.inject('POST', '/org/subscribers', { subscriber_id: subscriberId })).statusCode).toBe(
      201,
    );
    const res = await world.inject('POST', `/org/subscribers/${subscriberId}/subscriptions`, {
      plan_id: plan,
    });
    expect(res.statusCode).toBe(201);
    ids.push(`${subscriberId}/subscriptions/${res.json().subscription_id}`);
  }
  return ids;
}

const countsOf = (plans: PlanJson[]) =>
  Object.fromEntries(plans.map((plan) => [plan.key, plan.subscriber_count]));

describe('include=subscriber_count on GET /org/plans and /org/plans/{key}', () => {
  it('counts active subscriptions per plan: canceled ones and other plans do not count', async () => {
    const world = await suite.world({ plans: true });
    await subscribers(world, 'pro', 3, 'a');
    const free = await subscribers(world, 'free', 2, 'b');
    // One of free's subscribers is canceled, another moves to pro: neither counts for free any more.
    expect((await world.inject('POST', `/org/subscribers/${free[0]}/cancel`)).statusCode).toBe(200);
    const change = await world.inject('POST', '/org/subscribers/b-free-1/subscriptions/change', {
      plan_id: 'pro',
    });
    expect(change.statusCode).toBe(201);

    const list = await world.inject('GET', '/org/plans?include=subscriber_count');
    expect(list.statusCode).toBe(200);
    expect(countsOf(list.json().plans)).toEqual({ acme_custom: 0, free: 0, pro: 4 });

    const one = await world.inject('GET', '/org/plans/pro?include=subscriber_count');
    expect(one.statusCode).toBe(200);
    expect(one.json()).toMatchObject({ key: 'pro', subscriber_count: 4, grants: expect.any(Array) });
    expect(
      (await world.inject('GET', '/org/plans/acme_custom?include=subscriber_count')).json().subscriber_count,
    ).toBe(0);
  });

  it('leaves the default shapes unchanged', async () => {
    const world = await suite.world({ plans: true });
    await subscribers(world, 'pro', 1, 'c');
    const list = (await world.inject('GET', '/org/plans')).json();
    for (const plan of list.plans) expect(plan).not.toHaveProperty('subscriber_count');
    expect((await world.inject('GET', '/org/plans/pro')).json()).not.toHaveProperty('subscriber_count');
    // Writes answer the plan object without it too.
    const patched = await world.inject('PATCH', '/org/plans/pro', { name: 'Pro 2' });
    expect(patched.json()).not.toHaveProperty('subscriber_count');
  });

  it('counts a whole page in one query, however many plans it holds', async () => {
    const world = await suite.world({ plans: true });
    for (let i = 0; i < 5; i++) {
      expect(
        (await world.createPlan({ key: `extra-${i}`, name: `Extra ${i}`, kind: 'catalog' })).statusCode,
      ).toBe(201);
    }
    await subscribers(world, 'extra-3', 2, 'd');
    const queries = async (url: string) => {
      const before = world.ctx.queriesRun();
      expect((await world.inject('GET', url)).statusCode).toBe(200);
      return world.ctx.queriesRun() - before;
    };
    const plain = await queries('/org/plans?limit=100');
    expect(await queries('/org/plans?limit=100&include=subscriber_count')).toBe(plain + 1);
    expect(await queries('/org/plans?limit=2&include=subscriber_count')).toBe(plain + 1);

    const page = (
      await world.inject('GET', '/org/plans?limit=3&starting_after=extra-1&include=subscriber_count')
    ).json();
    expect(countsOf(page.plans)).toEqual({ 'extra-2': 0, 'extra-3': 2, 'extra-4': 0 });
    expect(page.has_more).toBe(true);
  });

  it('combines with kind, and counts only the calling organization', async () => {
    const mine = await suite.world({ plans: true });
    const theirs = await suite.world({ plans: true });
    await subscribers(theirs, 'acme_custom', 2, 'e');
    await subscribers(mine, 'acme_custom', 1, 'e');
    const custom = (await mine.inject('GET', '/org/plans?kind=custom&include=subscriber_count')).json();
    expect(countsOf(custom.plans)).toEqual({ acme_custom: 1 });
  });

  it('refuses other include values and stays behind catalog:read', async () => {
    const world = await suite.world({ plans: true });
    for (const url of [
      '/org/plans?include=grants',
      '/org/plans/pro?include=',
      '/org/plans/pro?include=subscriber_count,grants',
    ]) {
      const res = await world.inject('GET', url);
      expect(res.statusCode).toBe(422);
      expect(res.json().error).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: { location: 'querystring' },
      });
    }
    const subscribersOnly = await createKeyWithScopes(world.ctx.db, world.org.organization_id, [
      'subscribers:read',
    ]);
    const refused = await world.inject('GET', '/org/plans?include=subscriber_count', undefined, {
      'x-api-key': subscribersOnly.apiKey,
    });
    expect(refused.statusCode).toBe(403);
    // An unknown plan is still a 404 with the parameter.
    expect((await world.inject('GET', '/org/plans/nope?include=subscriber_count')).statusCode).toBe(404);
  });
});
