import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getArrangement, publishArrangement, saveArrangement } from '@ent/common/metering/arrangement';
import { createRedis } from '@ent/common/redis/connect';
import { catalogClient, injector } from '../../../gateway/test/helpers.ts';
import { createAdminContext, createTestOrganization, type AdminTestContext, type TestOrganization } from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { createReconciler } from '../../src/features/outbox/reconciler.ts';
import { createOutboxRelay } from '../../src/features/outbox/relay.ts';
import { makeAllDue } from '../../src/features/outbox/store.ts';
import { createSnapshotPublisher } from '../../src/features/snapshots/publisher.ts';

let ctx: AdminTestContext;
let org: TestOrganization;
let api: ReturnType<typeof catalogClient>;

beforeAll(async () => {
  // The relay is driven by hand here: admin's own follow-up passes would race these assertions.
  ctx = await createAdminContext({ relayFollowUp: false });
  org = await createTestOrganization(ctx.db, 'Outbox org');
  api = catalogClient(injector(ctx.app), org.headers);
  await api.feature('seats', 'limit');
  await api.plan('basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
  await api.subscriber('ann');
  await api.subscribe('ann', 'basic');
});
afterAll(() => ctx.close());

const entries = (kind?: string) => {
  let query = ctx.db
    .selectFrom('outbox')
    .selectAll()
    .where('organization_id', '=', org.organization_id)
    .orderBy('id');
  if (kind) query = query.where('kind', '=', kind as 'catalog');
  return query.execute();
};
const undone = async () => (await entries()).filter((entry) => entry.done_at === null);
const redisVersion = async (key: string) => Number((await ctx.redis.hget(key, 'v')) ?? 0);
const keys = () => ctx.app.redisKeys;
const subscriberInPostgres = async (id: string) =>
  (
    await ctx.db
      .selectFrom('subscribers')
      .select('version')
      .where('organization_id', '=', org.organization_id)
      .where('subscriber_id', '=', id)
      .executeTakeFirstOrThrow()
  ).version;
const metric = async (name: string) => {
  const text = (await ctx.app.metrics.registry.metrics());
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};

/** A Redis client that refuses every command at once, as one whose server is gone does. */
const deadRedis = () =>
  createRedis({ redisUrl: 'redis://127.0.0.1:1', redisClusterNodes: [] }, { lazyConnect: true, enableOfflineQueue: false });

describe('the outbox, written in the write transaction', () => {
  it('records each committed change with the version it produced, and the write-through marks it done', async () => {
    const before = (await entries()).length;
    await api.override('ann', 'seats', { kind: 'limit', limit: 10 });
    const recorded = (await entries()).slice(before);
    const version = await subscriberInPostgres('ann');
    expect(recorded).toEqual([
      expect.objectContaining({ kind: 'subscriber', subject: 'ann', version, done_at: expect.any(Date) }),
    ]);
    expect(await redisVersion(keys().subscriber(org.organization_id, 'ann'))).toBe(version + 1);
    // Other cases leave entries of their own undone on purpose; this write's are done.
    const undoneIds = new Set((await undone()).map((entry) => entry.id));
    expect(recorded.filter((entry) => undoneIds.has(entry.id))).toEqual([]);
  });

  it('records nothing for a write that did not commit', async () => {
    const before = (await entries()).length;
    const refused = await ctx.app.inject({
      method: 'POST',
      url: '/org/features',
      headers: org.headers,
      payload: { key: 'seats', name: 'again', kind: 'limit' },
    });
    expect(refused.statusCode).toBe(409);
    const missing = await ctx.app.inject({
      method: 'PUT',
      url: '/org/subscribers/nobody/overrides/seats',
      headers: org.headers,
      payload: { kind: 'limit', limit: 1 },
    });
    expect(missing.statusCode).toBe(404);
    expect((await entries()).length).toBe(before);
  });

  it('records catalog, auth and arrangement changes too', async () => {
    const before = (await entries()).length;
    await api.grants('basic', [{ feature: 'seats', kind: 'limit', limit: 4 }]);
    const { serviceAccountId, keyId } = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    const revoke = await ctx.app.inject({
      method: 'DELETE',
      url: `/org/service-accounts/${serviceAccountId}/api-keys/${keyId}`,
      headers: org.headers,
    });
    expect(revoke.statusCode).toBe(204);
    const arrangementVersion = await saveArrangement(ctx.db, org.organization_id, {
      plan: 'free',
      evalLimit: 1000,
      blocking: true,
      burstPerSecond: 500,
    });
    const kinds = (await entries()).slice(before).map((entry) => entry.kind);
    expect(kinds).toEqual(expect.arrayContaining(['catalog', 'auth', 'arrangement']));
    const arrangementEntry = (await entries('arrangement')).at(-1)!;
    expect(arrangementEntry.version + 1).toBe(arrangementVersion);
    expect(arrangementEntry.done_at).toBeNull(); // saved, not yet published: the relay's work
  });
});

describe('webhook deliveries, written in the write transaction', () => {
  it('are inserted in the same transaction as the change: visible inside it, invisible outside until it commits', async () => {
    // An organization of its own: other cases leave catalog entries of theirs undone.
    const org = await createTestOrganization(ctx.db, 'Deliveries org');
    const put = await ctx.app.inject({
      method: 'PUT',
      url: '/org/webhook',
      headers: org.headers,
      payload: { url: 'http://127.0.0.1:9/hooks' },
    });
    expect(put.statusCode).toBe(201);
    const seen: { inside: number; outside: number; outboxInside: number }[] = [];
    const count = (db: typeof ctx.db) =>
      db
        .selectFrom('webhook_deliveries')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('organization_id', '=', org.organization_id)
        .where('event_type', '=', 'feature.created')
        .executeTakeFirstOrThrow()
        .then((row) => Number(row.n));
    ctx.app.writePipeline.beforeCommit(async (trx, request) => {
      if (request.routeOptions.url !== '/org/features') return;
      const outboxInside = await trx
        .selectFrom('outbox')
        .select('id')
        .where('organization_id', '=', org.organization_id)
        .where('kind', '=', 'catalog')
        .where('done_at', 'is', null)
        .execute();
      seen.push({ inside: await count(trx), outside: await count(ctx.ownerDb), outboxInside: outboxInside.length });
    });
    const created = await ctx.app.inject({
      method: 'POST',
      url: '/org/features',
      headers: org.headers,
      payload: { key: 'sso', name: 'SSO', kind: 'flag' },
    });
    expect(created.statusCode).toBe(201);
    expect(seen).toEqual([{ inside: 1, outside: 0, outboxInside: 1 }]);
    expect(await count(ctx.ownerDb)).toBe(1);
  });
});

/** Starts a relay case from an empty queue, whatever other cases left undone or backed off. */
async function drainEverything(): Promise<void> {
  await makeAllDue(ctx.db);
  await createOutboxRelay({ db: ctx.db, publisher: ctx.app.snapshots }).drainOnce();
  expect(await ctx.db.selectFrom('outbox').select('id').where('done_at', 'is', null).execute()).toEqual([]);
}

describe('the relay', () => {
  it('publishes what the write-through could not (Redis unreachable from admin), once Redis answers', async () => {
    await drainEverything();
    ctx.redis.disconnect();
    try {
      const write = await api.override('ann', 'seats', { kind: 'limit', limit: 77 });
      expect(write.statusCode).toBe(200);
      const key = await ctx.app.inject({
        method: 'POST',
        url: `/org/service-accounts/${org.service_account_id}/api-keys`,
        headers: org.headers,
        payload: { name: 'during the outage', scopes: ['check'] },
      });
      expect(key.statusCode).toBe(201);
    } finally {
      await ctx.redis.connect();
    }
    expect((await undone()).map((entry) => entry.kind).sort()).toEqual(['auth', 'subscriber']);
    expect(await metric('outbox_pending_rows')).toBe(2);
    expect(await metric('outbox_oldest_pending_age_seconds')).toBeGreaterThan(0);
    const annInRedis = await redisVersion(keys().subscriber(org.organization_id, 'ann'));
    expect(annInRedis).toBe(await subscriberInPostgres('ann')); // one behind

    const result = await createOutboxRelay({ db: ctx.db, publisher: ctx.app.snapshots }).drainOnce();
    expect(result).toEqual({ published: 2, failed: 0 });
    expect(await undone()).toEqual([]);
    expect(await redisVersion(keys().subscriber(org.organization_id, 'ann'))).toBe((await subscriberInPostgres('ann')) + 1);
    const doc = JSON.parse((await ctx.redis.hget(keys().subscriber(org.organization_id, 'ann'), 'doc'))!);
    expect(doc.overrides.seats).toMatchObject({ kind: 'limit', limit: 77 });
    expect(await metric('outbox_pending_rows')).toBe(0);
    expect(await metric('outbox_oldest_pending_age_seconds')).toBe(0);
  });

  it('backs off an entry whose publish fails, and makes it due at once when Redis is back', async () => {
    await drainEverything();
    const redis = deadRedis();
    try {
      const publisher = createSnapshotPublisher({ db: ctx.db, redis, redisKeys: keys() });
      ctx.redis.disconnect();
      try {
        await api.override('ann', 'seats', { kind: 'limit', limit: 78 });
      } finally {
        await ctx.redis.connect();
      }
      const failing = await createOutboxRelay({ db: ctx.db, publisher }, { baseRetryMs: 60_000 }).drainOnce();
      expect(failing).toEqual({ published: 0, failed: 1 });
      const [entry] = await undone();
      expect(entry).toMatchObject({ attempts: 1, last_error: expect.any(String) });
      // 30 s at most (maxRetryMs), moved by up to 20% either way.
      expect(entry!.next_attempt_at.getTime()).toBeGreaterThan(Date.now() + 20_000);
      const working = createOutboxRelay({ db: ctx.db, publisher: ctx.app.snapshots });
      expect(await working.drainOnce()).toEqual({ published: 0, failed: 0 }); // not due yet
      await makeAllDue(ctx.db);
      expect(await working.drainOnce()).toEqual({ published: 1, failed: 0 });
      expect(await undone()).toEqual([]);
    } finally {
      redis.disconnect();
    }
  });

  it('leaves an entry leased by another relay alone until its lease runs out', async () => {
    await drainEverything();
    ctx.redis.disconnect();
    try {
      await api.override('ann', 'seats', { kind: 'limit', limit: 79 });
    } finally {
      await ctx.redis.connect();
    }
    const [entry] = await undone();
    // Another relay leased it (and died): it is due again only when the lease ends.
    await ctx.db
      .updateTable('outbox')
      .set({ next_attempt_at: sql`now() + interval '30 seconds'` })
      .where('id', '=', entry!.id)
      .execute();
    const relay = createOutboxRelay({ db: ctx.db, publisher: ctx.app.snapshots });
    expect(await relay.drainOnce()).toEqual({ published: 0, failed: 0 });
    await ctx.db.updateTable('outbox').set({ next_attempt_at: sql`now()` }).where('id', '=', entry!.id).execute();
    expect(await relay.drainOnce()).toEqual({ published: 1, failed: 0 });
  });

  it("publishes an import batch's one entry for all its subscribers, announced in one message (a runner that died before publishing)", async () => {
    await drainEverything();
    await api.subscriber('bo');
    await api.subscriber('cy');
    const ids = ['ann', 'bo', 'cy'];
    // What an import batch commits (bumpSubscribers): the versions moved, one `subscribers` entry naming them.
    await sql`
      UPDATE subscribers SET version = version + 1
      WHERE organization_id = ${org.organization_id} AND subscriber_id = ANY(${ids}::text[])
    `.execute(ctx.db);
    await sql`
      INSERT INTO outbox (organization_id, kind, subjects, version)
      VALUES (${org.organization_id}, 'subscribers', ${ids}::text[], 0)
    `.execute(ctx.db);
    const listener = ctx.redis.duplicate();
    const messages: string[] = [];
    listener.on('message', (_channel: string, message: string) => messages.push(message));
    await listener.subscribe(keys().invalidationChannel);
    try {
      expect(await createOutboxRelay({ db: ctx.db, publisher: ctx.app.snapshots }).drainOnce()).toEqual({
        published: 1,
        failed: 0,
      });
      expect(await undone()).toEqual([]);
      const versions = new Map<string, number>();
      for (const id of ids) {
        const inRedis = await redisVersion(keys().subscriber(org.organization_id, id));
        expect(inRedis).toBe((await subscriberInPostgres(id)) + 1);
        expect(Number(await ctx.redis.hget(keys().subscriberVersions(org.organization_id), id))).toBe(inRedis);
        versions.set(id, inRedis);
      }
      await expect.poll(() => messages.length).toBe(1);
      const announced = JSON.parse(messages[0]!) as { kind: string; subscriberIds: string[]; versions: number[] };
      expect(announced.kind).toBe('subscribers');
      expect(new Map(announced.subscriberIds.map((id, i) => [id, announced.versions[i]]))).toEqual(versions);
    } finally {
      listener.disconnect();
    }
  });

  it('prunes done entries once they are old', async () => {
    const relay = createOutboxRelay({ db: ctx.db, publisher: ctx.app.snapshots });
    await api.override('ann', 'seats', { kind: 'limit', limit: 11 }); // at least one done entry, whatever ran before
    // Pruning is for the whole table: done entries of every organization.
    const allDone = () => ctx.db.selectFrom('outbox').select('id').where('done_at', 'is not', null).execute();
    const done = await allDone();
    expect(done.length).toBeGreaterThan(0);
    expect(await relay.prune()).toBe(0);
    await ctx.db.updateTable('outbox').set({ done_at: sql`now() - interval '2 hours'` }).where('done_at', 'is not', null).execute();
    expect(await relay.prune()).toBe(done.length);
    expect(await allDone()).toEqual([]);
  });
});

describe('the reconciler', () => {
  const reconciler = () =>
    createReconciler({ db: ctx.db, redis: ctx.redis, redisKeys: keys(), publisher: ctx.app.snapshots });

  it('rebuilds an organization whose catalog Redis lost (restarted empty), subscribers included', async () => {
    await reconciler().reconcileOnce({ full: true }); // everything in place first
    await ctx.redis.del(keys().catalog(org.organization_id), keys().subscriber(org.organization_id, 'ann'));
    const report = await reconciler().reconcileOnce({ full: false });
    expect(report.rebuilt).toBeGreaterThanOrEqual(1);
    expect(report.failed).toBe(0);
    expect(await redisVersion(keys().catalog(org.organization_id))).toBeGreaterThan(0);
    expect(await redisVersion(keys().subscriber(org.organization_id, 'ann'))).toBe((await subscriberInPostgres('ann')) + 1);
  });

  it('republishes documents Redis holds older than Postgres (a failover replica that lost writes)', async () => {
    const org2 = await createTestOrganization(ctx.db, 'Lost writes');
    const api2 = catalogClient(injector(ctx.app), org2.headers);
    await api2.feature('sso', 'flag');
    await api2.subscriber('bea');
    await api2.override('bea', 'sso', { kind: 'flag', allowed: true });
    await saveArrangement(ctx.db, org2.organization_id, { plan: 'pro', evalLimit: 5, blocking: false, burstPerSecond: 9 });
    await reconciler().reconcileOnce({ full: false });

    // The replica that took over never saw the latest writes: older versions, older documents.
    await ctx.redis.hset(keys().subscriber(org2.organization_id, 'bea'), 'v', 1, 'doc', JSON.stringify({ exists: true, plans: [], overrides: {} }));
    await ctx.redis.hset(keys().auth(org2.organization_id), 'v', 0);
    await ctx.redis.del(keys().arrangement(org2.organization_id));
    const report = await reconciler().reconcileOnce({ full: false });
    expect(report.repaired).toMatchObject({ subscriber: 1, auth: 1, arrangement: 1 });
    const doc = JSON.parse((await ctx.redis.hget(keys().subscriber(org2.organization_id, 'bea'), 'doc'))!);
    expect(doc.overrides.sso).toMatchObject({ kind: 'flag', allowed: true });
    expect(await ctx.redis.hgetall(keys().arrangement(org2.organization_id))).toMatchObject({
      limit: '5',
      blocking: '0',
      burst: '9',
      plan: 'pro',
    });

    const again = await reconciler().reconcileOnce({ full: true });
    expect(again.repaired).toEqual({ catalog: 0, auth: 0, arrangement: 0, subscriber: 0 });
    expect(again.rebuilt).toBe(0);
  });

  it("republishes subscribers missing from the gate's version index (an index key lost on its own)", async () => {
    await reconciler().reconcileOnce({ full: true });
    const version = await subscriberInPostgres('ann');
    await ctx.redis.del(keys().subscriberVersions(org.organization_id));
    const report = await reconciler().reconcileOnce({ full: true });
    expect(report.repaired.subscriber).toBeGreaterThanOrEqual(1);
    expect(await ctx.redis.hget(keys().subscriberVersions(org.organization_id), 'ann')).toBe(String(version + 1));
    expect((await reconciler().reconcileOnce({ full: true })).repaired.subscriber).toBe(0);
  });
});

describe('the arrangement in Redis', () => {
  it('is never replaced by an older version, whoever publishes it', async () => {
    const version = await saveArrangement(ctx.db, org.organization_id, { plan: 'free', evalLimit: 42, blocking: true, burstPerSecond: 100 });
    const current = await getArrangement(ctx.db, org.organization_id);
    expect(current.version).toBe(version);
    expect(await publishArrangement(ctx.redis, keys(), org.organization_id, current)).toBe(true);
    const stale = { ...current, evalLimit: 7, version: version - 1 };
    expect(await publishArrangement(ctx.redis, keys(), org.organization_id, stale)).toBe(false);
    expect(await ctx.redis.hget(keys().arrangement(org.organization_id), 'limit')).toBe('42');
  });
});
