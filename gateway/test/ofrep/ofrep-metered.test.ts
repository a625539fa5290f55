import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveArrangement, publishArrangement } from '@ent/common/metering/arrangement';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { buildGatewayApp, type GatewayApp } from '../../src/app.ts';

/** DESIGN.md §5 "OFREP": a metered feature answers what remains of it now, with the live use in the metadata. */
let ctx: AdminTestContext;
let gateway: GatewayApp;
let org: TestOrganization;

const call = (method: 'POST' | 'PUT', url: string, payload: unknown, headers: Record<string, string> = {}) =>
  gateway.inject({ method, url, headers: { ...org.headers, ...headers }, payload: payload as object });
const single = (key: string, subscriber: string) =>
  call('POST', `/ofrep/v1/evaluate/flags/${key}`, { context: { targetingKey: subscriber } });
const bulk = (subscriber: string, headers: Record<string, string> = {}) =>
  call('POST', '/ofrep/v1/evaluate/flags', { context: { targetingKey: subscriber } }, headers);
const consume = async (subscriber: string, amount: number) => {
  const res = await call('POST', `/org/subscribers/${subscriber}/entitlements/check`, {
    feature: 'api_calls',
    consume: amount,
  });
  expect(res.statusCode, res.body).toBe(200);
};

beforeAll(async () => {
  ctx = await createAdminContext();
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = ctx.app.server.address() as AddressInfo;
  gateway = await buildGatewayApp({
    config: { ...ctx.config, adminUrl: `http://127.0.0.1:${port}` },
    logger: false,
  });
  await gateway.ready();
  org = await createTestOrganization(ctx.db, 'OFREP metered');
  const arrangement = { plan: 'free', evalLimit: 100_000, blocking: true, burstPerSecond: 100_000 };
  await saveArrangement(ctx.db, org.organization_id, arrangement);
  await publishArrangement(ctx.redis, ctx.app.redisKeys, org.organization_id, arrangement);
  const write = async (url: string, payload: unknown) => {
    const res = await call('POST', url, payload);
    expect(res.statusCode, res.body).toBeLessThan(300);
  };
  await write('/org/features', { key: 'api_calls', name: 'API calls', kind: 'metered' });
  await write('/org/features', { key: 'seats', name: 'Seats', kind: 'metered' });
  await write('/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });
  await write('/org/plans', {
    key: 'team',
    name: 'Team',
    kind: 'catalog',
    grants: [
      { feature: 'api_calls', kind: 'metered', limit: 10 },
      { feature: 'seats', kind: 'metered', limit: null, reset: 'never' },
      { feature: 'sso', kind: 'flag' },
    ],
  });
  for (const id of ['ann', 'bea']) {
    await write('/org/subscribers', { subscriber_id: id, name: id });
    await write(`/org/subscribers/${id}/subscriptions`, { plan_id: 'team' });
  }
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

describe('OFREP on metered features, with their live use', () => {
  it('answers what remains, and the use, after consumes', async () => {
    await consume('ann', 3);
    const res = await single('api_calls', 'ann');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      key: 'api_calls',
      value: 7,
      reason: 'STATIC',
      variant: 'plan',
      metadata: { source: 'plan', kind: 'metered', unlimited: false, used: 3, limit: 10 },
    });
    expect(res.json().metadata.resets_at).toMatch(/^\d{4}-\d\d-01T00:00:00\.000Z$/);
    await consume('ann', 2);
    expect((await single('api_calls', 'ann')).json()).toMatchObject({ value: 5, metadata: { used: 5 } });
    expect((await single('seats', 'ann')).json()).toEqual({
      key: 'seats',
      value: Number.MAX_SAFE_INTEGER,
      reason: 'STATIC',
      variant: 'plan',
      metadata: { source: 'plan', kind: 'metered', unlimited: true, used: 0 },
    });
  });

  it('bulk carries each metered feature with its use, and a new ETag once the use changes', async () => {
    const first = await bulk('bea');
    expect(first.statusCode, first.body).toBe(200);
    const flags = (first.json() as { flags: { key: string; value: unknown }[] }).flags;
    expect(flags.map((flag) => [flag.key, flag.value])).toEqual([
      ['api_calls', 10],
      ['seats', Number.MAX_SAFE_INTEGER],
      ['sso', true],
    ]);
    const etag = first.headers.etag as string;
    expect((await bulk('bea', { 'if-none-match': etag })).statusCode).toBe(304);
    await consume('bea', 4);
    const changed = await bulk('bea', { 'if-none-match': etag });
    expect(changed.statusCode).toBe(200);
    expect(changed.headers.etag).not.toBe(etag);
    expect(changed.json().flags[0]).toMatchObject({ key: 'api_calls', value: 6, metadata: { used: 4 } });
  });
});
