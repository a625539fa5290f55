import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newId } from '@ent/common/ids';
import type { WriteOutcome } from '../../src/features/shared/write/outcome.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
  subscriberVersion,
} from '../../../test-support/admin-context.ts';

let ctx: AdminTestContext;
let org: TestOrganization;
const writes: WriteOutcome[] = [];
const lastWrite = () => writes[writes.length - 1]!;

/** Plans are made straight in the database so these tests do not depend on the plan routes. */
async function insertPlan(organizationId: string, key: string, archived = false): Promise<string> {
  const id = newId('plan');
  await ctx.db
    .insertInto('plans')
    .values({
      id,
      organization_id: organizationId,
      key,
      name: key,
      kind: 'catalog',
      archived_at: archived ? new Date() : null,
    })
    .execute();
  return id;
}

beforeAll(async () => {
  ctx = await createAdminContext();
  ctx.app.writePipeline.onCommitted(async (_request, write) => void writes.push(write));
});
// Every case gets an organization of its own (four plans and an archived one, no subscriber yet), so cases
// share no state and run in any order.
beforeEach(async () => {
  org = await createTestOrganization(ctx.db, 'Acme');
  for (const key of ['basic', 'pro', 'enterprise', 'addon']) await insertPlan(org.organization_id, key);
  await insertPlan(org.organization_id, 'legacy', true);
});
afterAll(() => ctx.close());

const inject = (method: 'GET' | 'POST', url: string, payload?: unknown) =>
  ctx.app.inject({
    method,
    url,
    headers: org.headers,
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
const newSubscriber = async (subscriberId: string) =>
  expect((await inject('POST', '/org/subscribers', { subscriber_id: subscriberId })).statusCode).toBe(201);
const subscribe = (subscriberId: string, planKey: unknown) =>
  inject('POST', `/org/subscribers/${subscriberId}/subscriptions`, { plan_id: planKey });
const change = (subscriberId: string, payload: unknown) =>
  inject('POST', `/org/subscribers/${subscriberId}/subscriptions/change`, payload);
const cancel = (subscriberId: string, subscriptionId: string) =>
  inject('POST', `/org/subscribers/${subscriberId}/subscriptions/${subscriptionId}/cancel`);
const list = async (subscriberId: string, query = '') => {
  const res = await inject('GET', `/org/subscribers/${subscriberId}/subscriptions${query}`);
  expect(res.statusCode).toBe(200);
  return res.json() as {
    subscriptions: Array<{ subscription_id: string; plan_id: string; status: string }>;
    has_more: boolean;
  };
};
const versionOf = (subscriberId: string) => subscriberVersion(ctx.db, org.organization_id, subscriberId);

describe('POST .../subscriptions', () => {
  it('subscribes to a plan by key and returns 201 with the subscription', async () => {
    await newSubscriber('alice');
    const before = await versionOf('alice');
    const res = await subscribe('alice', 'basic');
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      subscription_id: expect.stringMatching(/^sub_[0-9a-z]{26}$/),
      subscriber_id: 'alice',
      plan_id: 'basic',
      status: 'active',
      created_at: expect.stringMatching(/Z$/),
      canceled_at: null,
    });
    expect(await versionOf('alice')).toBe(before + 1);
    const write = lastWrite();
    expect(write.details).toEqual({ subscription_id: body.subscription_id, plan_id: 'basic' });
    expect([...write.subscribersChanged]).toEqual(['alice']);
    expect(write.events).toEqual([{ type: 'subscription.created', data: body }]);
  });

  it('allows active subscriptions to several different plans', async () => {
    await newSubscriber('alice');
    await subscribe('alice', 'basic');
    expect((await subscribe('alice', 'addon')).statusCode).toBe(201);
    expect((await list('alice', '?status=active')).subscriptions.map((s) => s.plan_id).sort()).toEqual([
      'addon',
      'basic',
    ]);
  });

  it('refuses a second active subscription to the same plan with 409', async () => {
    await newSubscriber('alice');
    await subscribe('alice', 'basic');
    const res = await subscribe('alice', 'basic');
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({
      code: 'CONFLICT',
      details: { field: 'plan_id', value: 'basic' },
    });
  });

  it('refuses an archived plan with 409 CONFLICT', async () => {
    await newSubscriber('alice');
    const res = await subscribe('alice', 'legacy');
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({
      code: 'CONFLICT',
      details: { field: 'plan_id', value: 'legacy' },
    });
  });

  it('refuses an unknown plan with 422 VALIDATION_ERROR on plan_id', async () => {
    await newSubscriber('alice');
    const res = await subscribe('alice', 'nope');
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'plan_id', value: 'nope' },
    });
  });

  it('does not find a plan of another organization', async () => {
    await newSubscriber('alice');
    const other = await createTestOrganization(ctx.db, 'Other');
    await insertPlan(other.organization_id, 'theirs');
    expect((await subscribe('alice', 'theirs')).statusCode).toBe(422);
  });

  it('answers 404 for an unknown subscriber', async () => {
    const res = await subscribe('ghost', 'basic');
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatchObject({
      code: 'NOT_FOUND',
      details: { field: 'subscriber_id', value: 'ghost' },
    });
  });

  it.each([[{}], [{ plan_id: '' }], [{ plan_id: 5 }], [{ plan_id: 'basic', status: 'active' }]])(
    'refuses %j with 422',
    async (payload) => {
      const res = await inject('POST', '/org/subscribers/alice/subscriptions', payload);
      expect(res.statusCode).toBe(422);
      expect(res.json().error.code).toBe('VALIDATION_ERROR');
    },
  );
  it('lets exactly one of several concurrent requests for the same plan through', async () => {
    await newSubscriber('racer');
    const results = await Promise.all(Array.from({ length: 6 }, () => subscribe('racer', 'pro')));
    const statuses = results.map((res) => res.statusCode).sort();
    expect(statuses).toEqual([201, 409, 409, 409, 409, 409]);
    expect((await list('racer')).subscriptions).toHaveLength(1);
  });
});

describe('POST .../subscriptions/change', () => {
  it('ends the named subscription and starts one on the new plan in one step', async () => {
    await newSubscriber('bob');
    const old = (await subscribe('bob', 'basic')).json();
    const before = await versionOf('bob');
    const res = await change('bob', { plan_id: 'pro', subscription_id: old.subscription_id });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      subscription_id: expect.stringMatching(/^sub_/),
      subscriber_id: 'bob',
      plan_id: 'pro',
      status: 'active',
      created_at: expect.any(String),
      canceled_at: null,
      canceled_subscription_id: old.subscription_id,
    });
    expect(body.subscription_id).not.toBe(old.subscription_id);
    expect(await versionOf('bob')).toBe(before + 1);
    const write = lastWrite();
    expect(write.details).toEqual({
      subscription_id: body.subscription_id,
      canceled_subscription_id: old.subscription_id,
      plan_id: { from: 'basic', to: 'pro' },
    });
    expect([...write.subscribersChanged]).toEqual(['bob']);
    expect(write.events).toEqual([{ type: 'subscription.changed', data: body }]);
    const all = (await list('bob')).subscriptions;
    expect(all.map((s) => [s.plan_id, s.status])).toEqual([
      ['pro', 'active'],
      ['basic', 'canceled'],
    ]);
  });

  it('changes the only active subscription when subscription_id is omitted', async () => {
    await newSubscriber('bob');
    await subscribe('bob', 'pro');
    const res = await change('bob', { plan_id: 'enterprise' });
    expect(res.statusCode).toBe(201);
    expect(res.json().plan_id).toBe('enterprise');
    expect((await list('bob', '?status=active')).subscriptions.map((s) => s.plan_id)).toEqual(['enterprise']);
    expect(lastWrite().details).toMatchObject({ plan_id: { from: 'pro', to: 'enterprise' } });
  });

  it('refuses an omitted subscription_id with 422 when there is no active subscription', async () => {
    await newSubscriber('carol');
    const res = await change('carol', { plan_id: 'pro' });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'subscription_id' },
    });
  });

  it('refuses an omitted subscription_id with 422 when several are active', async () => {
    await newSubscriber('carol');
    await subscribe('carol', 'basic');
    await subscribe('carol', 'addon');
    const res = await change('carol', { plan_id: 'pro' });
    expect(res.statusCode).toBe(422);
    expect(res.json().error.details).toMatchObject({ field: 'subscription_id', active_subscriptions: 2 });
    expect((await list('carol', '?status=active')).subscriptions).toHaveLength(2);
  });

  it('answers 404 for an unknown subscription_id, or one of another subscriber', async () => {
    await newSubscriber('carol');
    await newSubscriber('bob');
    await subscribe('bob', 'enterprise');
    expect((await change('carol', { plan_id: 'pro', subscription_id: 'sub_nope' })).statusCode).toBe(404);
    const bobs = (await list('bob', '?status=active')).subscriptions[0]!;
    const res = await change('carol', { plan_id: 'pro', subscription_id: bobs.subscription_id });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatchObject({ code: 'NOT_FOUND', details: { field: 'subscription_id' } });
    expect((await list('bob', '?status=active')).subscriptions[0]!.plan_id).toBe('enterprise');
  });

  it('answers 404 for an unknown subscriber', async () => {
    expect((await change('ghost', { plan_id: 'pro' })).statusCode).toBe(404);
  });

  it('refuses a canceled subscription with 409', async () => {
    await newSubscriber('bob');
    await cancel('bob', (await subscribe('bob', 'basic')).json().subscription_id);
    const canceledOne = (await list('bob', '?status=canceled')).subscriptions[0]!;
    const res = await change('bob', { plan_id: 'basic', subscription_id: canceledOne.subscription_id });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({ code: 'CONFLICT', details: { field: 'subscription_id' } });
  });

  it('refuses an archived plan with 409 and an unknown plan with 422, changing nothing', async () => {
    await newSubscriber('bob');
    await subscribe('bob', 'enterprise');
    const before = await list('bob');
    const archived = await change('bob', { plan_id: 'legacy' });
    expect(archived.statusCode).toBe(409);
    expect(archived.json().error.details).toMatchObject({ field: 'plan_id', value: 'legacy' });
    const unknown = await change('bob', { plan_id: 'nope' });
    expect(unknown.statusCode).toBe(422);
    expect(unknown.json().error.details).toMatchObject({ field: 'plan_id', value: 'nope' });
    expect(await list('bob')).toEqual(before);
  });

  it('refuses a change to the plan the subscriber is already on (409)', async () => {
    await newSubscriber('bob');
    await subscribe('bob', 'enterprise');
    await newSubscriber('carol');
    await subscribe('carol', 'basic');
    await subscribe('carol', 'addon');
    expect((await change('bob', { plan_id: 'enterprise' })).statusCode).toBe(409);
    const carols = (await list('carol', '?status=active')).subscriptions;
    const onBasic = carols.find((s) => s.plan_id === 'basic')!;
    // Carol is also on addon: moving basic to addon would make two active addon subscriptions.
    expect(
      (await change('carol', { plan_id: 'addon', subscription_id: onBasic.subscription_id })).statusCode,
    ).toBe(409);
  });

  it.each([
    [{}],
    [{ subscription_id: 'sub_x' }],
    [{ plan_id: 'pro', extra: true }],
    [{ plan_id: 'pro', subscription_id: 7 }],
  ])('refuses %j with 422', async (payload) => {
    const res = await change('bob', payload);
    expect(res.statusCode).toBe(422);
    expect(res.json().error.code).toBe('VALIDATION_ERROR');
  });
});

/** Where the subscription's subscription-anchored metered periods start (not in SPEC.md's response). */
const anchorOf = async (subscriptionId: string) =>
  await ctx.db
    .selectFrom('subscriptions')
    .select(['anchored_at', 'created_at'])
    .where('id', '=', subscriptionId)
    .executeTakeFirstOrThrow();

describe('the metered anchor (decisions.md, "Metered usage: how it is built")', () => {
  it('anchors a new subscription at its creation', async () => {
    await newSubscriber('ann');
    const created = (await subscribe('ann', 'basic')).json();
    const { anchored_at, created_at } = await anchorOf(created.subscription_id);
    expect(anchored_at).toEqual(created_at);
    expect(created_at.toISOString()).toBe(created.created_at);
  });

  it("carries the replaced subscription's anchor across plan changes, and not across a cancel", async () => {
    await newSubscriber('bob');
    const first = (await subscribe('bob', 'basic')).json();
    const anchor = new Date('2026-01-31T09:30:00.000Z');
    await ctx.db
      .updateTable('subscriptions')
      .set({ anchored_at: anchor })
      .where('id', '=', first.subscription_id)
      .execute();
    const second = (await change('bob', { plan_id: 'pro' })).json();
    expect((await anchorOf(second.subscription_id)).anchored_at).toEqual(anchor);
    const third = (
      await change('bob', { plan_id: 'enterprise', subscription_id: second.subscription_id })
    ).json();
    expect((await anchorOf(third.subscription_id)).anchored_at).toEqual(anchor);
    // The response keeps SPEC.md's shape: no anchor in it.
    expect(Object.keys(third)).not.toContain('anchored_at');

    // Only the replaced subscription's anchor: another active one keeps its own.
    const addon = (await subscribe('bob', 'addon')).json();
    const addonAnchor = await anchorOf(addon.subscription_id);
    expect(addonAnchor.anchored_at).toEqual(addonAnchor.created_at);

    expect((await cancel('bob', third.subscription_id)).statusCode).toBe(200);
    const again = (await subscribe('bob', 'pro')).json();
    const fresh = await anchorOf(again.subscription_id);
    expect(fresh.anchored_at).toEqual(fresh.created_at);
    expect(fresh.anchored_at).not.toEqual(anchor);
  });
});

describe('POST .../subscriptions/{subscription_id}/cancel', () => {
  it('cancels an active subscription and reports the plan it ended', async () => {
    await newSubscriber('dave');
    const sub = (await subscribe('dave', 'pro')).json();
    const before = await versionOf('dave');
    const res = await cancel('dave', sub.subscription_id);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ subscription_id: sub.subscription_id, plan_id: 'pro', status: 'canceled' });
    expect(Date.parse(body.canceled_at)).toBeGreaterThanOrEqual(Date.parse(body.created_at));
    expect(await versionOf('dave')).toBe(before + 1);
    const write = lastWrite();
    expect(write.details).toEqual({ plan_id: 'pro' });
    expect([...write.subscribersChanged]).toEqual(['dave']);
    expect(write.events).toEqual([{ type: 'subscription.canceled', data: body }]);
  });

  it('answers 200 unchanged with details null when it is already canceled', async () => {
    await newSubscriber('dave');
    await cancel('dave', (await subscribe('dave', 'pro')).json().subscription_id);
    const canceled = (await list('dave', '?status=canceled')).subscriptions[0]!;
    const before = await versionOf('dave');
    const res = await cancel('dave', canceled.subscription_id);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(canceled);
    expect(await versionOf('dave')).toBe(before);
    expect(lastWrite().details).toBeNull();
    expect(lastWrite().events).toEqual([]);
  });

  it('lets the subscriber subscribe to the plan again after a cancel', async () => {
    await newSubscriber('dave');
    await cancel('dave', (await subscribe('dave', 'pro')).json().subscription_id);
    expect((await subscribe('dave', 'pro')).statusCode).toBe(201);
  });

  it('answers 404 for an unknown subscription, one of another subscriber, or an unknown subscriber', async () => {
    await newSubscriber('dave');
    await newSubscriber('alice');
    await subscribe('alice', 'basic');
    expect((await cancel('dave', 'sub_nope')).statusCode).toBe(404);
    const alices = (await list('alice')).subscriptions[0]!;
    expect((await cancel('dave', alices.subscription_id)).statusCode).toBe(404);
    expect((await cancel('ghost', alices.subscription_id)).statusCode).toBe(404);
    expect((await list('alice')).subscriptions[0]!.status).toBe('active');
  });
});

describe('GET .../subscriptions', () => {
  it('lists newest first, filters by status and pages with starting_after', async () => {
    await newSubscriber('erin');
    const made: string[] = [];
    for (const plan of ['basic', 'pro', 'enterprise'])
      made.push((await subscribe('erin', plan)).json().subscription_id);
    await cancel('erin', made[0]!);
    const all = await list('erin');
    expect(all.subscriptions.map((s) => s.subscription_id)).toEqual([...made].reverse());
    expect(all.has_more).toBe(false);
    expect((await list('erin', '?status=canceled')).subscriptions.map((s) => s.subscription_id)).toEqual([
      made[0],
    ]);
    expect((await list('erin', '?status=active')).subscriptions.map((s) => s.subscription_id)).toEqual([
      made[2],
      made[1],
    ]);
    const first = await list('erin', '?limit=2');
    expect(first.subscriptions.map((s) => s.subscription_id)).toEqual([made[2], made[1]]);
    expect(first.has_more).toBe(true);
    const next = await list('erin', `?limit=2&starting_after=${made[1]}`);
    expect(next.subscriptions.map((s) => s.subscription_id)).toEqual([made[0]]);
    expect(next.has_more).toBe(false);
  });

  it("refuses a starting_after that is not one of the subscriber's subscriptions with 422", async () => {
    await newSubscriber('erin');
    await newSubscriber('gina');
    const ginas = (await subscribe('gina', 'basic')).json().subscription_id as string;
    for (const cursor of ['sub_zzzzzzzzzzzzzzzzzzzzzzzzzz', 'x', ginas]) {
      const res = await ctx.app.inject({
        method: 'GET',
        url: `/org/subscribers/erin/subscriptions?starting_after=${cursor}`,
        headers: org.headers,
      });
      expect(res.statusCode, cursor).toBe(422);
      expect(res.json().error).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: { field: 'starting_after' },
      });
    }
  });

  it('keeps subscriptions to a plan that was archived after they were made', async () => {
    await newSubscriber('frank');
    await insertPlan(org.organization_id, 'sunset');
    expect((await subscribe('frank', 'sunset')).statusCode).toBe(201);
    await ctx.db.updateTable('plans').set({ archived_at: new Date() }).where('key', '=', 'sunset').execute();
    expect((await list('frank')).subscriptions).toMatchObject([{ plan_id: 'sunset', status: 'active' }]);
  });

  it('answers 404 for an unknown subscriber', async () => {
    expect((await inject('GET', '/org/subscribers/ghost/subscriptions')).statusCode).toBe(404);
  });

  it.each(['?status=paused', '?limit=0', '?plan_id=basic'])('refuses %s with 422', async (query) => {
    const res = await inject('GET', `/org/subscribers/erin/subscriptions${query}`);
    expect(res.statusCode).toBe(422);
  });
});
