import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { rolloverCreditId } from '@ent/common/metering/credits';
import type { GatewayApp } from '../../../gateway/src/app.ts';
import { gatewayOverAdmin, injector } from '../../../gateway/test/helpers.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

/**
 * DESIGN.md §5: the export, imported into an empty organization, makes an identical one. Its lines carry no ids
 * the service makes for subscriptions and overrides, only natural keys; a credit's id is its natural key. So
 * "identical" is byte for byte, credits (with what they have spent) and archived plans included.
 */
let ctx: AdminTestContext;
let source: TestOrganization;
let gateway: GatewayApp;
const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();
const monthStart = (ms: number, months = 0) => {
  const at = new Date(ms);
  return Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + months, 1);
};
const NOW = Date.now();
const ROLLOVER_ID = rolloverCreditId('cus_004', 'tokens', monthStart(NOW));

async function tokens(org: TestOrganization, subscriberId: string, consume?: number) {
  const res = await injector(gateway)({
    method: 'POST',
    url: `/org/subscribers/${subscriberId}/entitlements/check`,
    headers: org.headers,
    payload: { feature: 'tokens', ...(consume === undefined ? {} : { consume }) },
  });
  expect(res.statusCode, JSON.stringify(res.json())).toBe(200);
  return res.json() as {
    allowed: boolean;
    remaining: number;
    credits: { credit_id: string; remaining: number }[];
  };
}

const unlimitedEvals = (org: TestOrganization) =>
  saveArrangement(ctx.db, org.organization_id, {
    plan: 'free',
    evalLimit: 1_000_000,
    blocking: true,
    burstPerSecond: 10_000,
  });

const exportOf = async (org: TestOrganization) => {
  const res = await ctx.app.inject({ method: 'GET', url: '/org/export', headers: org.headers });
  expect(res.statusCode).toBe(200);
  return res.body;
};

async function importInto(org: TestOrganization, ndjson: string) {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/org/imports',
    headers: { ...org.headers, 'content-type': 'application/x-ndjson' },
    payload: ndjson,
  });
  expect(res.statusCode, res.body).toBe(202);
  const url = `/org/imports/${res.json().import_id}`;
  for (let attempt = 0; attempt < 600; attempt++) {
    const state = (await ctx.app.inject({ method: 'GET', url, headers: org.headers })).json();
    if (state.status !== 'running') return state;
    await sleep(100);
  }
  throw new Error(`${url} still running after a minute`);
}

beforeAll(async () => {
  ctx = await createAdminContext();
  gateway = await gatewayOverAdmin(ctx);
  source = await createTestOrganization(ctx.db, 'Source');
  await unlimitedEvals(source);
  const send = async (method: 'POST' | 'PUT' | 'DELETE', url: string, payload?: object) => {
    const res = await ctx.app.inject({
      method,
      url,
      headers: source.headers,
      ...(payload ? { payload } : {}),
    });
    expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
    return res.json();
  };
  await send('POST', '/org/features', {
    key: 'sso',
    name: 'SSO',
    kind: 'flag',
    description: 'single sign-on',
  });
  await send('POST', '/org/features', { key: 'seats', name: 'Seats', kind: 'limit' });
  await send('POST', '/org/features', { key: 'api-calls', name: 'API calls', kind: 'metered' });
  await send('POST', '/org/features', { key: 'tokens', name: 'Tokens', kind: 'metered' });
  await send('POST', '/org/plans', {
    key: 'pro',
    name: 'Pro',
    kind: 'catalog',
    grants: [
      { feature: 'sso', kind: 'flag' },
      { feature: 'seats', kind: 'limit', limit: 25 },
      { feature: 'api-calls', kind: 'metered', limit: 10_000, reset: 'week', reset_anchor: 'subscription' },
      { feature: 'tokens', kind: 'metered', limit: 2, reset: 'month', rollover: { max: 5 } },
    ],
  });
  await send('POST', '/org/plans', {
    key: 'basic',
    name: 'Basic',
    kind: 'catalog',
    grants: [{ feature: 'seats', kind: 'limit', limit: null }],
  });
  await send('POST', '/org/plans', { key: 'acme-deal', name: 'Acme deal', kind: 'custom', grants: [] });
  for (let n = 0; n < 40; n++) {
    const id = `cus_${String(n).padStart(3, '0')}`;
    await send('POST', '/org/subscribers', {
      subscriber_id: id,
      ...(n % 3 === 0 ? { name: `Customer ${n}` } : {}),
    });
    await send('POST', `/org/subscribers/${id}/subscriptions`, { plan_id: n % 2 === 0 ? 'pro' : 'basic' });
  }
  await send('POST', '/org/subscribers/cus_000/subscriptions', { plan_id: 'acme-deal' });
  await send('POST', '/org/subscribers/cus_001/subscriptions/change', { plan_id: 'pro' });
  await send('POST', '/org/subscribers', { subscriber_id: 'no-plan@example.com' });
  await send('PUT', '/org/subscribers/cus_002/overrides/sso', { kind: 'flag', allowed: false });
  await send('PUT', '/org/subscribers/cus_003/overrides/seats', {
    kind: 'limit',
    limit: 100,
    expires_at: '2031-05-06T07:08:09.123Z',
  });
  await send('PUT', '/org/subscribers/cus_003/overrides/api-calls', { kind: 'metered', limit: null });

  // An archived plan that still has a subscriber, who subscribed before it was archived.
  await send('POST', '/org/plans', {
    key: 'legacy',
    name: 'Legacy',
    kind: 'catalog',
    grants: [{ feature: 'tokens', kind: 'metered', limit: 1 }],
  });
  await send('POST', '/org/subscribers/cus_005/subscriptions', { plan_id: 'legacy' });
  await send('POST', '/org/plans/legacy/archive');

  // Credits: spent past the allowance through the gateway (Redis's figure, not yet persisted), spent as the worker
  // persisted it, a rollover, a scheduled one; a voided and an expired one are history and stay behind.
  await send('POST', '/org/subscribers/cus_000/credits', {
    feature: 'tokens',
    amount: 5,
    priority: 1,
    name: 'Promotion',
    expires_at: iso(NOW + 30 * DAY),
  });
  await send('POST', '/org/subscribers/cus_000/credits', { feature: 'tokens', amount: 7 });
  expect(await tokens(source, 'cus_000', 4)).toMatchObject({ allowed: true, remaining: 10 });
  const persisted = await send('POST', '/org/subscribers/cus_002/credits', { feature: 'tokens', amount: 6 });
  await ctx.db.updateTable('credits').set({ spent: 3 }).where('id', '=', persisted.credit_id).execute();
  await send('POST', '/org/subscribers/cus_002/credits', {
    feature: 'tokens',
    amount: 9,
    effective_at: iso(NOW + 2 * DAY),
  });
  await sql`
    INSERT INTO credits (id, organization_id, subscriber_id, feature_id, amount, spent, priority, effective_at,
      expires_at, source, source_period_start, created_at)
    SELECT ${ROLLOVER_ID}, ${source.organization_id}, 'cus_004', id, 4, 1, 10, ${new Date(monthStart(NOW))},
      ${new Date(monthStart(NOW, 1))}, 'rollover', ${new Date(monthStart(NOW, -1))}, ${new Date(monthStart(NOW))}
    FROM features WHERE organization_id = ${source.organization_id} AND key = 'tokens'
  `.execute(ctx.db);
  const voided = await send('POST', '/org/subscribers/cus_006/credits', { feature: 'tokens', amount: 3 });
  await send('DELETE', `/org/subscribers/cus_006/credits/${voided.credit_id}`);
  await send('POST', '/org/subscribers/cus_006/credits', {
    feature: 'tokens',
    amount: 3,
    effective_at: iso(NOW - 3 * DAY),
    expires_at: iso(NOW - DAY),
  });
}, 180_000);
afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

const creditLines = (ndjson: string) =>
  ndjson
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((record) => record.type === 'credit');

describe('export, import into a new organization, export again', () => {
  it('gives the same export, and the import applied every line', async () => {
    const first = await exportOf(source);
    const lines = first.split('\n').filter(Boolean).length;
    expect(lines).toBe(4 + 4 + 41 + 42 + 3 + 5);
    expect(first).toContain('{"type":"plan","key":"legacy","name":"Legacy","kind":"catalog","grants":[');
    expect(first).toMatch(/"key":"legacy".*"archived":true\}\n/);
    expect(creditLines(first).map((c) => [c.subscriber_id, c.amount, c.spent, c.source])).toEqual(
      expect.arrayContaining([
        ['cus_000', 5, 2, 'manual'],
        ['cus_000', 7, 0, 'manual'],
        ['cus_002', 6, 3, 'manual'],
        ['cus_002', 9, 0, 'manual'],
        ['cus_004', 4, 1, 'rollover'],
      ]),
    );

    const target = await createTestOrganization(ctx.db, 'Target');
    await unlimitedEvals(target);
    const result = await importInto(target, first);
    expect(result).toMatchObject({ status: 'succeeded', lines, applied: lines, failed: 0, errors: [] });
    expect(await exportOf(target)).toBe(first);
    // Subscription-anchored periods start where the original's do (cus_001's pro kept its basic's anchor).
    const apiCallsPeriod = async (org: TestOrganization, subscriberId: string) => {
      const res = await injector(gateway)({
        method: 'POST',
        url: `/org/subscribers/${subscriberId}/entitlements/check`,
        headers: org.headers,
        payload: { feature: 'api-calls' },
      });
      const { period_start: start, resets_at: end } = res.json() as {
        period_start: string;
        resets_at: string;
      };
      return [start, end];
    };
    for (const id of ['cus_000', 'cus_001'])
      expect(await apiCallsPeriod(target, id)).toEqual(await apiCallsPeriod(source, id));

    // Once more into the copy: every line is equal to what is there.
    const again = await importInto(target, first);
    expect(again).toMatchObject({ status: 'succeeded', lines, applied: 0, unchanged: lines, failed: 0 });
    expect(await exportOf(target)).toBe(first);
  }, 180_000);

  it('gateways spend an imported credit from what it had spent, not from 0', async () => {
    const target = await createTestOrganization(ctx.db, 'Spender');
    await unlimitedEvals(target);
    expect(await importInto(target, await exportOf(source))).toMatchObject({
      status: 'succeeded',
      failed: 0,
    });
    // Usage is not exported: the allowance (2) is whole again; the promotion has 3 of 5 left, the top-up 7.
    const before = await tokens(target, 'cus_000');
    expect(before.remaining).toBe(2 + 3 + 7);
    expect(await tokens(target, 'cus_000', 5)).toMatchObject({ allowed: true, remaining: 7 });
    const list = await ctx.app.inject({
      method: 'GET',
      url: '/org/subscribers/cus_000/credits?feature=tokens',
      headers: target.headers,
    });
    expect(list.json().credits.map((c: { amount: number; spent: number }) => [c.amount, c.spent])).toEqual(
      expect.arrayContaining([
        [5, 5],
        [7, 0],
      ]),
    );
    // The archived plan's subscriber kept it; the plan takes no new subscriber.
    const refused = await ctx.app.inject({
      method: 'POST',
      url: '/org/subscribers/cus_007/subscriptions',
      headers: target.headers,
      payload: { plan_id: 'legacy' },
    });
    expect(refused.statusCode).toBe(409);
  }, 180_000);
});
