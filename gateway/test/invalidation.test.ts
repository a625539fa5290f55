import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import type { Invalidation } from '@ent/common/snapshots/store';
import {
  createAdminContext,
  createTestOrganization,
  subscriberVersion,
  type AdminTestContext,
  type TestOrganization,
} from '../../test-support/admin-context.ts';
import { buildGatewayApp, type GatewayApp } from '../src/app.ts';
import { catalogClient, injector } from './helpers.ts';
import { waitFor } from './processes.ts';

let ctx: AdminTestContext;
let gateway: GatewayApp;
let org: TestOrganization;

const check = (subscriber: string) =>
  gateway.inject({
    method: 'POST',
    url: `/org/subscribers/${subscriber}/entitlements/check`,
    headers: org.headers,
    payload: { feature: 'seats' },
  });
const announce = (invalidation: Invalidation) =>
  ctx.redis.publish(ctx.app.redisKeys.invalidationChannel, JSON.stringify(invalidation));
const cached = (subscriber: string) => gateway.snapshotCache.cached(org.organization_id, subscriber, Date.now());
const snapshotVersion = async (subscriber: string) => (await subscriberVersion(ctx.db, org.organization_id, subscriber)) + 1;

beforeAll(async () => {
  ctx = await createAdminContext();
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = ctx.app.server.address() as AddressInfo;
  gateway = await buildGatewayApp({ config: { ...ctx.config, adminUrl: `http://127.0.0.1:${port}` }, logger: false });
  await gateway.ready();
  org = await createTestOrganization(ctx.db, 'Invalidation org');
  const api = catalogClient(injector(gateway), org.headers);
  await api.feature('seats', 'limit');
  await api.plan('basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
  for (const id of ['alice', 'bob']) {
    await api.subscriber(id);
    await api.subscribe(id, 'basic');
  }
});

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

describe('invalidation announcements carry versions', () => {
  it('a late announcement of the version a gateway holds does not evict it; a newer one does', async () => {
    for (const id of ['alice', 'bob']) expect((await check(id)).statusCode).toBe(200);
    expect(cached('alice')).toBeDefined();
    const aliceVersion = await snapshotVersion('alice');
    const bobVersion = await snapshotVersion('bob');

    // The relay (or a rebuild) announcing what this gateway already holds: nothing to evict. Announcements
    // arrive in order on one connection, so once bob's newer one has evicted bob, alice's was handled too.
    await announce({ kind: 'subscriber', organizationId: org.organization_id, subscriberId: 'alice', version: aliceVersion });
    await announce({ kind: 'subscriber', organizationId: org.organization_id, subscriberId: 'bob', version: bobVersion + 1 });
    await waitFor(async () => cached('bob') === undefined, 'the newer announcement to evict bob', 5000);
    expect(cached('alice')).toBeDefined();

    await announce({ kind: 'subscriber', organizationId: org.organization_id, subscriberId: 'alice', version: aliceVersion + 1 });
    await waitFor(async () => cached('alice') === undefined, 'the newer announcement to evict alice', 5000);
  });

  it('ignores announcements without a version (older publishers)', async () => {
    expect((await check('alice')).statusCode).toBe(200);
    await ctx.redis.publish(
      ctx.app.redisKeys.invalidationChannel,
      JSON.stringify({ kind: 'subscriber', organizationId: org.organization_id, subscriberId: 'alice' }),
    );
    await announce({ kind: 'subscriber', organizationId: org.organization_id, subscriberId: 'bob', version: Number.MAX_SAFE_INTEGER });
    expect((await check('bob')).statusCode).toBe(200);
    await announce({ kind: 'subscriber', organizationId: org.organization_id, subscriberId: 'bob', version: Number.MAX_SAFE_INTEGER });
    await waitFor(async () => cached('bob') === undefined, 'bob evicted', 5000);
    expect(cached('alice')).toBeDefined();
  });
});
