import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { createAdminContext, createTestOrganization, type AdminTestContext, type TestOrganization } from '../../../test-support/admin-context.ts';
import { redisCluster } from '../../../test-support/redis-setups.ts';
import { createReconciler } from '../../../admin/src/features/outbox/reconciler.ts';
import { recordUsageHistory } from '../../../admin/src/features/usage/history.job.ts';
import type { GatewayApp } from '../../src/app.ts';
import { catalogClient, injector, gatewayOverAdmin } from '../helpers.ts';

// The eval path end to end on a 3-master Redis Cluster: snapshots, the batched gate script, BullMQ queues
// and key revocation all keep to one hash slot per organization.
const clock = new ManualClock(Date.UTC(2031, 4, 10, 12, 0, 0, 0));
let stopCluster: () => Promise<void>;
let ctx: AdminTestContext;
let gateway: GatewayApp;
let org: TestOrganization;
let api: ReturnType<typeof catalogClient>;

beforeAll(async () => {
  const cluster = await redisCluster.start();
  stopCluster = cluster.stop;
  ctx = await createAdminContext({ clock, config: { redisClusterNodes: cluster.config.redisClusterNodes } });
  gateway = await gatewayOverAdmin(ctx, { clock });
  org = await createTestOrganization(ctx.db, 'Cluster org');
  const arrangement = { plan: 'free', evalLimit: 5, blocking: true, burstPerSecond: 10_000 };
  await saveArrangement(ctx.db, org.organization_id, arrangement);
  await ctx.app.snapshots.publishArrangement(org.organization_id);
  api = catalogClient(injector(gateway), org.headers);
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
  await stopCluster?.();
});

const check = (subscriber: string, feature: string, headers = org.headers) =>
  gateway.inject({ method: 'POST', url: `/org/subscribers/${subscriber}/entitlements/check`, headers, payload: { feature } });

describe('the eval gateway on a Redis Cluster', () => {
  it('answers, reflects each write at once, meters with headers, and refuses a revoked key', async () => {
    await api.feature('seats', 'limit');
    await api.plan('basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
    await api.subscriber('alice');
    await api.subscribe('alice', 'basic');

    const first = await check('alice', 'seats');
    expect(first.statusCode).toBe(200);
    expect(first.json()).toEqual({ feature: 'seats', kind: 'limit', limit: 3, source: 'plan' });
    expect(first.headers['x-svc-eval-used']).toBe('1');

    await api.grants('basic', [{ feature: 'seats', kind: 'limit', limit: 8 }]);
    expect((await check('alice', 'seats')).json()).toMatchObject({ limit: 8, source: 'plan' });
    await api.override('alice', 'seats', { kind: 'limit', limit: 50 });
    const overridden = await check('alice', 'seats');
    expect(overridden.json()).toMatchObject({ limit: 50, source: 'override' });
    expect(overridden.headers['x-svc-eval-warn']).toBeUndefined();
    const fourth = await check('alice', 'seats');
    expect(fourth.headers['x-svc-eval-warn']).toBe('80');

    const { apiKey, serviceAccountId, keyId } = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    expect((await check('alice', 'seats', { 'x-api-key': apiKey })).statusCode).toBe(200);
    await api.send('DELETE', `/org/service-accounts/${serviceAccountId}/api-keys/${keyId}`, undefined, 204);
    expect((await check('alice', 'seats', { 'x-api-key': apiKey })).statusCode).toBe(401);

    // BullMQ's queues keep to one slot on the cluster.
    await ctx.app.queues['audit-settle'].add('audit-settle', { olderThanMs: 60_000 });
    const jobs = await ctx.app.queues['audit-settle'].getJobCounts('waiting', 'active', 'completed', 'delayed');
    expect(Object.values(jobs).reduce((sum, n) => sum + n, 0)).toBeGreaterThanOrEqual(1);

    // Every write was published through; the reconciler reads across the cluster's slots and rebuilds what a
    // master lost.
    const undone = await ctx.db.selectFrom('outbox').select('id').where('done_at', 'is', null).execute();
    expect(undone).toEqual([]);
    const reconciler = createReconciler({ db: ctx.db, redis: ctx.redis, redisKeys: ctx.app.redisKeys, publisher: ctx.app.snapshots });
    await ctx.redis.del(ctx.app.redisKeys.catalog(org.organization_id));
    expect(await reconciler.reconcileOnce({ full: true })).toMatchObject({ rebuilt: 1, failed: 0 });
    expect(await ctx.redis.hget(ctx.app.redisKeys.catalog(org.organization_id), 'v')).not.toBeNull();

    const usage = await gateway.inject({ method: 'GET', url: '/org/usage/current', headers: org.headers });
    expect(usage.json()).toMatchObject({ count: 5, limit: 5, warn: '100' });
  });

  it("samples every organization's month across the cluster's slots into the usage history", async () => {
    const others = await Promise.all([1, 2, 3, 4].map((i) => createTestOrganization(ctx.db, `Sampled ${i}`)));
    for (const [i, other] of others.entries()) {
      await ctx.redis.hset(ctx.app.redisKeys.evalUsage(other.organization_id, '2031-05'), 'count', 10 * (i + 1));
    }
    // One batch holds organizations whose usage hashes sit on different masters.
    await recordUsageHistory({ db: ctx.db, redis: ctx.redis, clock, config: ctx.config }, { batchSize: 3 });
    const rows = await ctx.db
      .selectFrom('usage_days')
      .select(['organization_id', 'count'])
      .where('organization_id', 'in', others.map((other) => other.organization_id))
      .execute();
    expect(new Map(rows.map((row) => [row.organization_id, row.count]))).toEqual(
      new Map(others.map((other, i) => [other.organization_id, 10 * (i + 1)])),
    );
    const history = await gateway.inject({ method: 'GET', url: '/org/usage/history', headers: others[3]!.headers });
    expect(history.json().months[0]).toMatchObject({ period: '2031-05', count: 40, days: [{ date: '2031-05-10', count: 40 }] });
  });
});
