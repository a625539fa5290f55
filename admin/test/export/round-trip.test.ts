import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

/**
 * DESIGN.md §5: the export, imported into an empty organization, makes an identical one. Its lines carry no ids
 * (subscription and override ids, timestamps), only natural keys, so "identical" is byte for byte.
 */
let ctx: AdminTestContext;
let source: TestOrganization;

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
  source = await createTestOrganization(ctx.db, 'Source');
  const send = async (method: 'POST' | 'PUT', url: string, payload: object) => {
    const res = await ctx.app.inject({ method, url, headers: source.headers, payload });
    expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
  };
  await send('POST', '/org/features', {
    key: 'sso',
    name: 'SSO',
    kind: 'flag',
    description: 'single sign-on',
  });
  await send('POST', '/org/features', { key: 'seats', name: 'Seats', kind: 'limit' });
  await send('POST', '/org/features', { key: 'api-calls', name: 'API calls', kind: 'metered' });
  await send('POST', '/org/plans', {
    key: 'pro',
    name: 'Pro',
    kind: 'catalog',
    grants: [
      { feature: 'sso', kind: 'flag' },
      { feature: 'seats', kind: 'limit', limit: 25 },
      { feature: 'api-calls', kind: 'metered', limit: 10_000, reset: 'week', reset_anchor: 'subscription' },
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
}, 180_000);
afterAll(() => ctx.close());

describe('export, import into a new organization, export again', () => {
  it('gives the same export, and the import applied every line', async () => {
    const first = await exportOf(source);
    const lines = first.split('\n').filter(Boolean).length;
    expect(lines).toBe(3 + 3 + 41 + 41 + 3);

    const target = await createTestOrganization(ctx.db, 'Target');
    const result = await importInto(target, first);
    expect(result).toMatchObject({ status: 'succeeded', lines, applied: lines, failed: 0, errors: [] });
    expect(await exportOf(target)).toBe(first);

    // Once more into the copy: every line is equal to what is there.
    const again = await importInto(target, first);
    expect(again).toMatchObject({ status: 'succeeded', lines, applied: 0, unchanged: lines, failed: 0 });
    expect(await exportOf(target)).toBe(first);
  }, 180_000);
});
