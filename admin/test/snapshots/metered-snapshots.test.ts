import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCatalog, buildSubscribers } from '@ent/common/snapshots/build';
import type { SubscriberDoc } from '@ent/common/snapshots/documents';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

/** What the gateway resolves metered features from (DESIGN.md §5): grants, overrides and subscription anchors. */
let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Metered snapshots');
  const features = [
    ['sso', 'flag'],
    ['seats', 'limit'],
    ['api-calls', 'metered'],
    ['exports', 'metered'],
  ];
  for (const [key, kind] of features) await write('POST', '/org/features', { key, name: key, kind });
  await write('POST', '/org/plans', {
    key: 'basic',
    name: 'Basic',
    kind: 'catalog',
    grants: [
      { feature: 'sso', kind: 'flag' },
      { feature: 'seats', kind: 'limit', limit: 3 },
      { feature: 'api-calls', kind: 'metered', limit: 1000 },
    ],
  });
  await write('POST', '/org/plans', {
    key: 'pro',
    name: 'Pro',
    kind: 'catalog',
    grants: [
      { feature: 'api-calls', kind: 'metered', limit: null, reset: 'day', reset_anchor: 'subscription' },
      { feature: 'exports', kind: 'metered', limit: 10, reset: 'never', soft: true, rollover: { max: 5 } },
    ],
  });
  await write('POST', '/org/plans', { key: 'addon', name: 'Add-on', kind: 'catalog' });
});
afterAll(() => ctx.close());

async function write(method: 'POST' | 'PUT', url: string, payload?: object) {
  const res = await ctx.app.inject({ method, url, headers: org.headers, ...(payload ? { payload } : {}) });
  expect(res.statusCode, res.body).toBeLessThan(300);
  return res.json();
}

const planIds = async () =>
  Object.fromEntries(
    (
      await ctx.db
        .selectFrom('plans')
        .select(['key', 'id'])
        .where('organization_id', '=', org.organization_id)
        .execute()
    ).map((row) => [row.key, row.id]),
  );

const subscriberDoc = async (subscriberId: string): Promise<SubscriberDoc> =>
  (await buildSubscribers(ctx.db, org.organization_id, [subscriberId])).get(subscriberId)!.doc;

const anchorOf = async (subscriptionId: string): Promise<number> =>
  (
    await ctx.db
      .selectFrom('subscriptions')
      .select('anchored_at')
      .where('id', '=', subscriptionId)
      .executeTakeFirstOrThrow()
  ).anchored_at.getTime();

describe('snapshot documents with metered features', () => {
  it('builds metered grants with every term, beside flag and limit grants', async () => {
    const ids = await planIds();
    const catalog = (await buildCatalog(ctx.db, org.organization_id))!.doc;
    expect(catalog.features).toEqual({
      'api-calls': 'metered',
      exports: 'metered',
      seats: 'limit',
      sso: 'flag',
    });
    expect(catalog.plans[ids.basic!]!.grants).toEqual({
      sso: { kind: 'flag' },
      seats: { kind: 'limit', limit: 3 },
      'api-calls': {
        kind: 'metered',
        limit: 1000,
        reset: 'month',
        anchor: 'calendar',
        soft: false,
        rollover: null,
      },
    });
    expect(catalog.plans[ids.pro!]!.grants).toEqual({
      'api-calls': {
        kind: 'metered',
        limit: null,
        reset: 'day',
        anchor: 'subscription',
        soft: false,
        rollover: null,
      },
      exports: { kind: 'metered', limit: 10, reset: 'never', anchor: 'calendar', soft: true, rollover: 5 },
    });
  });

  it('builds metered overrides as limit-only values', async () => {
    await write('POST', '/org/subscribers', { subscriber_id: 'ovr' });
    await write('PUT', '/org/subscribers/ovr/overrides/api-calls', {
      kind: 'metered',
      limit: 50,
      expires_at: '2030-01-01T00:00:00Z',
    });
    await write('PUT', '/org/subscribers/ovr/overrides/seats', { kind: 'limit', limit: 7 });
    const doc = await subscriberDoc('ovr');
    expect(doc.overrides).toEqual({
      'api-calls': { kind: 'metered', limit: 50, expiresAt: Date.parse('2030-01-01T00:00:00Z') },
      seats: { kind: 'limit', limit: 7, expiresAt: null },
    });
    // No subscription: no anchors.
    expect(doc).toEqual({ exists: true, plans: [], overrides: doc.overrides });
  });

  it('maps each active plan to its subscription anchor, and carries the anchor across a plan change', async () => {
    const ids = await planIds();
    await write('POST', '/org/subscribers', { subscriber_id: 'ann' });
    const basic = await write('POST', '/org/subscribers/ann/subscriptions', { plan_id: 'basic' });
    const addon = await write('POST', '/org/subscribers/ann/subscriptions', { plan_id: 'addon' });
    const anchor = Date.parse('2026-01-31T09:30:00.000Z');
    await ctx.db
      .updateTable('subscriptions')
      .set({ anchored_at: new Date(anchor) })
      .where('id', '=', basic.subscription_id)
      .execute();
    const addonAnchor = await anchorOf(addon.subscription_id);
    expect(addonAnchor).toBe(Date.parse(addon.created_at));
    expect((await subscriberDoc('ann')).subscribedAt).toEqual({
      [ids.basic!]: anchor,
      [ids.addon!]: addonAnchor,
    });

    const pro = await write('POST', '/org/subscribers/ann/subscriptions/change', {
      plan_id: 'pro',
      subscription_id: basic.subscription_id,
    });
    const doc = await subscriberDoc('ann');
    expect(doc.plans.sort()).toEqual([ids.addon, ids.pro].sort());
    expect(doc.subscribedAt).toEqual({ [ids.pro!]: anchor, [ids.addon!]: addonAnchor });
    expect(await anchorOf(pro.subscription_id)).toBe(anchor);

    // Canceled subscriptions leave the document, anchors and all.
    await write('POST', `/org/subscribers/ann/subscriptions/${addon.subscription_id}/cancel`);
    expect((await subscriberDoc('ann')).subscribedAt).toEqual({ [ids.pro!]: anchor });
  });

  it('publishes subscribedAt through Redis to the gateway rebuild route', async () => {
    const ids = await planIds();
    await write('POST', '/org/subscribers', { subscriber_id: 'bo' });
    const sub = await write('POST', '/org/subscribers/bo/subscriptions', { plan_id: 'pro' });
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/internal/snapshots/subscriber',
      payload: { organization_id: org.organization_id, subscriber_id: 'bo' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().doc).toEqual({
      exists: true,
      plans: [ids.pro],
      overrides: {},
      subscribedAt: { [ids.pro!]: Date.parse(sub.created_at) },
    });
  });
});
