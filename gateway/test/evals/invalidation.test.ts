import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Invalidation } from '@ent/common/snapshots/store';
import {
  createAdminContext,
  createTestOrganization,
  subscriberVersion,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import type { GatewayApp } from '../../src/app.ts';
import { catalogClient, injector, gatewayOverAdmin } from '../helpers.ts';
import { waitFor } from '../processes.ts';

let ctx: AdminTestContext;
let gateway: GatewayApp;
let second: GatewayApp;
let org: TestOrganization;
let api: ReturnType<typeof catalogClient>;

const check = (subscriber: string) =>
  gateway.inject({
    method: 'POST',
    url: `/org/subscribers/${subscriber}/entitlements/check`,
    headers: org.headers,
    payload: { feature: 'seats' },
  });
const announce = (invalidation: Invalidation) =>
  ctx.redis.publish(ctx.app.redisKeys.invalidationChannel, JSON.stringify(invalidation));
const cached = (subscriber: string, on: GatewayApp = gateway) =>
  on.snapshotCache.cached(org.organization_id, subscriber, Date.now());
/** The seats limit in a gateway's cached entry, without an eval. */
const seatsOf = (subscriber: string, on: GatewayApp = gateway) => {
  const result = cached(subscriber, on)?.result('seats');
  return result?.kind === 'limit' ? result.limit : undefined;
};
const snapshotVersion = async (subscriber: string) => (await subscriberVersion(ctx.db, org.organization_id, subscriber)) + 1;

beforeAll(async () => {
  ctx = await createAdminContext();
  gateway = await gatewayOverAdmin(ctx);
  second = await gatewayOverAdmin(ctx);
  org = await createTestOrganization(ctx.db, 'Invalidation org');
  api = catalogClient(injector(gateway), org.headers);
  await api.feature('seats', 'limit');
  await api.plan('basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
  for (const id of ['alice', 'bob']) {
    await api.subscriber(id);
    await api.subscribe(id, 'basic');
  }
});

afterAll(async () => {
  await gateway?.close();
  await second?.close();
  await ctx?.close();
});

describe('invalidation announcements carry versions', () => {
  it('a late announcement of the version a gateway holds changes nothing; a newer one refreshes the entry in place', async () => {
    for (const id of ['alice', 'bob']) expect((await check(id)).statusCode).toBe(200);
    const alice = cached('alice');
    expect(alice).toBeDefined();

    // The relay (or a rebuild) announcing what this gateway already holds: nothing to do. Announcements arrive
    // in order on one connection, so once bob's (a real write's) has been acted on, alice's was handled too.
    await announce({ kind: 'subscriber', organizationId: org.organization_id, subscriberId: 'alice', version: await snapshotVersion('alice') });
    await api.override('bob', 'seats', { kind: 'limit', limit: 99 });
    // Without any eval of bob: the entry was read again from Redis when the write was announced, and never
    // left the cache meanwhile (it is what a gateway answers from if Redis goes away).
    await waitFor(async () => seatsOf('bob') === 99, "bob's entry refreshed", 5000);
    expect(cached('alice')).toBe(alice);
  });

  it('ignores announcements without a version (older publishers)', async () => {
    for (const id of ['alice', 'bob']) expect((await check(id)).statusCode).toBe(200);
    const alice = cached('alice');
    expect(alice).toBeDefined();
    await ctx.redis.publish(
      ctx.app.redisKeys.invalidationChannel,
      JSON.stringify({ kind: 'subscriber', organizationId: org.organization_id, subscriberId: 'alice' }),
    );
    await api.override('bob', 'seats', { kind: 'limit', limit: 100 });
    await waitFor(async () => seatsOf('bob') === 100, "bob's entry refreshed", 5000);
    expect(cached('alice')).toBe(alice);
  });

  it("an import batch's one announcement for all its subscribers refreshes them on every gateway", async () => {
    await api.plan('team', [{ feature: 'seats', kind: 'limit', limit: 40 }]);
    const ids = ['carol', 'dave'];
    for (const id of ids) {
      await api.subscriber(id);
      await api.subscribe(id, 'basic');
    }
    for (const on of [gateway, second])
      for (const id of ids) {
        const res = await on.inject({
          method: 'POST',
          url: `/org/subscribers/${id}/entitlements/check`,
          headers: org.headers,
          payload: { feature: 'seats' },
        });
        expect(res.statusCode).toBe(200);
      }
    const entries = [gateway, second].map((on) => cached('carol', on));
    expect(entries.every((entry) => entry !== undefined)).toBe(true);

    const posted = await ctx.app.inject({
      method: 'POST',
      url: '/org/imports',
      headers: { ...org.headers, 'content-type': 'application/x-ndjson' },
      payload: ids
        .map((id) => JSON.stringify({ type: 'subscription', subscriber_id: id, plan_id: 'team' }))
        .join('\n'),
    });
    expect(posted.statusCode, posted.body).toBe(202);
    await ctx.app.imports.runner.idle();
    const done = await ctx.app.inject({ method: 'GET', url: posted.headers.location as string, headers: org.headers });
    expect(done.json()).toMatchObject({ status: 'succeeded', applied: 2 });

    // No eval: each gateway read both documents again when the batch's one `subscribers` message arrived.
    for (const on of [gateway, second])
      for (const id of ids)
        await waitFor(async () => seatsOf(id, on) === 40, `${id}'s entry refreshed on both gateways`, 5000);
    // Replaced in place, never evicted meanwhile (what a gateway answers from if Redis goes away).
    expect([gateway, second].map((on) => cached('carol', on))).not.toEqual(entries);
  });
});
