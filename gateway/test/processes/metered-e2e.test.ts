import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createDb } from '@ent/common/db/connect';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { redisKeys } from '@ent/common/redis/keys';
import { Receiver } from '../../../admin/test/webhook/receiver.ts';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { catalogClient } from '../helpers.ts';
import {
  healthy,
  httpClient,
  ownRedisAnswers,
  serviceEnv,
  startGateways,
  startNode,
  startOwnRedis,
  startRedis,
  waitFor,
  type Started,
} from '../processes.ts';

/**
 * Metered usage end to end with real processes (issue 34): admin, the worker and two gateways on one database and
 * a Redis of this test. Every catalog write goes through a gateway (forwarded to admin) with the organization's key,
 * so admin's catalog, the gateway's metering and the worker's persistence are exercised together.
 */
let database: TestDatabase;
let redisServer: Started;
let redisPort: number;
let admin: Started;
let worker: Started | undefined;
let gateways: Started[] = [];
let env: Record<string, string>;
let urls: string[];
let db: ReturnType<typeof createDb>;
let redis: Redis;
let org: TestOrganization;
let api: ReturnType<typeof catalogClient>;
const receiver = new Receiver();
const prefix = testRedisPrefix();
const keys = redisKeys(prefix);
// Generous: the worker restarted in the refill test starts with tsx on a machine that may be saturated.
const PERSIST_MS = 60_000;

const call = (url: string, method: string, path: string, payload?: unknown, extra: Record<string, string> = {}) =>
  httpClient(url)({ method, url: path, headers: { ...org.headers, ...extra }, payload });

const consume = (url: string, subscriber: string, n: number, feature = 'calls') =>
  call(url, 'POST', `/org/subscribers/${subscriber}/entitlements/check`, n === 0 ? { feature } : { feature, consume: n });

/** The current figure as a plain check answers it on `url` (200 asserted). */
async function usedOn(url: string, subscriber: string, feature = 'calls'): Promise<number> {
  const answer = await consume(url, subscriber, 0, feature);
  expect(answer.statusCode, JSON.stringify(answer.json())).toBe(200);
  return answer.json().used as number;
}

async function persistedUsed(subscriber: string, feature = 'calls'): Promise<number[]> {
  const rows = await db
    .selectFrom('metered_usage')
    .select(['used', 'period_start'])
    .where('organization_id', '=', org.organization_id)
    .where('subscriber_id', '=', subscriber)
    .where('feature_key', '=', feature)
    .orderBy('period_start', 'desc')
    .execute();
  return rows.map((row) => row.used);
}

async function waitPersisted(subscriber: string, used: number): Promise<void> {
  try {
    await waitFor(async () => (await persistedUsed(subscriber))[0] === used, `${subscriber} persisted`, PERSIST_MS);
  } catch (error) {
    const rows = await db.selectFrom('metered_usage').selectAll().where('subscriber_id', '=', subscriber).execute();
    const balances = await redis.keys(`${prefix}*:m:${subscriber}|*`);
    const hashes = await Promise.all(balances.map((key) => redis.hgetall(key)));
    const dirty = await redis.keys(`${prefix}*mdirty*`);
    throw new Error(
      `${(error as Error).message} at ${used}: rows ${JSON.stringify(rows)}, Redis ${JSON.stringify(hashes)}, dirty ${JSON.stringify(dirty)}, worker ${worker?.output().slice(-1500)}`,
    );
  }
}

const startWorker = () => {
  worker = startNode('admin/src/worker.ts', env);
};

let planCount = 0;
async function meteredPlan(grant: Record<string, unknown>): Promise<string> {
  const key = `plan${planCount++}`;
  await api.plan(key, [{ feature: 'calls', kind: 'metered', ...grant }]);
  return key;
}

let subscriberCount = 0;
async function subscribed(plan: string): Promise<{ id: string; subscription: string }> {
  const id = `sub${subscriberCount++}`;
  await api.subscriber(id);
  return { id, subscription: await api.subscribe(id, plan) };
}

beforeAll(async () => {
  database = await createTestDatabase();
  ({ server: redisServer, port: redisPort } = await startOwnRedis());
  const service = await serviceEnv({ database, redisPort, prefix });
  env = { ...service.env, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' };
  redis = new Redis(env.REDIS_URL!, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  admin = startNode('admin/src/server.ts', env);
  await healthy(service.adminUrl);
  ({ gateways, urls } = await startGateways(env, 2));
  startWorker();
  db = createDb(database.appUrl, { max: 2 });
  org = await createTestOrganization(db, 'Metered end to end');
  await saveArrangement(db, org.organization_id, {
    plan: null,
    evalLimit: null,
    blocking: false,
    burstPerSecond: 100_000,
  });
  api = catalogClient(httpClient(urls[0]!), org.headers);
  await api.send('POST', '/org/features', { key: 'calls', name: 'API calls', kind: 'metered' }, 201);
}, 240_000);

afterAll(async () => {
  await Promise.all([...gateways, admin, worker].filter(Boolean).map((p) => p!.stop()));
  await redisServer?.stop();
  await receiver.close().catch(() => undefined);
  redis?.disconnect();
  await db?.destroy();
  await database?.drop();
}, 60_000);

describe('metered usage across admin, worker and two gateways', () => {
  it('consumes exactly min(N, L) across both gateways, reads it on either, persists it, and lists the past period', async () => {
    const limit = 7;
    const attempts = 16;
    const plan = await meteredPlan({ limit, reset: 'month' });
    const { id } = await subscribed(plan);
    const answers = await Promise.all(Array.from({ length: attempts }, (_, i) => consume(urls[i % 2]!, id, 1)));
    for (const answer of answers) expect(answer.statusCode).toBe(200);
    expect(answers.filter((answer) => answer.json().allowed === true)).toHaveLength(Math.min(attempts, limit));

    for (const url of urls) {
      const usage = await call(url, 'GET', `/org/subscribers/${id}/usage`);
      expect(usage.statusCode).toBe(200);
      expect(usage.json().usage).toEqual([
        expect.objectContaining({ feature: 'calls', used: limit, limit, remaining: 0, allowed: false }),
      ]);
    }
    await waitPersisted(id, limit);

    // A change of reset moves the balance to another period: the month just left is a past period with its figure.
    await api.grants(plan, [{ feature: 'calls', kind: 'metered', limit, reset: 'day' }]);
    await waitFor(async () => (await usedOn(urls[1]!, id)) === 0, 'the new (daily) period on gateway B');
    expect(await usedOn(urls[0]!, id)).toBe(0);
    const periods = await call(urls[1]!, 'GET', `/org/subscribers/${id}/usage/calls/periods`);
    expect(periods.statusCode).toBe(200);
    expect(periods.json().periods).toEqual([expect.objectContaining({ feature: 'calls', used: limit })]);
  }, 120_000);

  it('keeps the period\u2019s usage through grant changes, archiving, a plan change and a cancellation', async () => {
    const plan = await meteredPlan({ limit: 10 });
    const other = await meteredPlan({ limit: 20 });
    const { id, subscription } = await subscribed(plan);
    expect((await consume(urls[0]!, id, 4)).json()).toMatchObject({ allowed: true, used: 4 });
    expect((await consume(urls[1]!, id, 2)).json()).toMatchObject({ allowed: true, used: 6 });

    const bothSee = async (what: string, expected: Record<string, unknown>) => {
      for (const url of urls) {
        const answer = await consume(url, id, 0);
        expect(answer.statusCode, what).toBe(200);
        expect(answer.json(), `${what} on ${url}`).toMatchObject(expected);
      }
    };
    // Read-your-writes: each write answered by the gateway, then the next eval on either gateway sees it.
    await api.grants(plan, [{ feature: 'calls', kind: 'metered', limit: 6 }]);
    await bothSee('limit lowered', { used: 6, limit: 6, allowed: false });
    expect((await consume(urls[1]!, id, 1)).json()).toMatchObject({ allowed: false, used: 6 });

    await api.grants(plan, [{ feature: 'calls', kind: 'metered', limit: 8 }]);
    await bothSee('limit raised', { used: 6, limit: 8, allowed: true });

    await api.grants(plan, [{ feature: 'calls', kind: 'metered', limit: 8, soft: true }]);
    await bothSee('soft', { used: 6, limit: 8 });
    expect((await consume(urls[0]!, id, 3)).json()).toMatchObject({ allowed: true, used: 9, overage: 1 });

    await api.grants(plan, [{ feature: 'calls', kind: 'metered', limit: 8, soft: false }]);
    await bothSee('hard again', { used: 9, limit: 8, allowed: false });

    await api.send('POST', `/org/plans/${plan}/archive`, undefined, 200);
    await bothSee('plan archived', { used: 9 });

    const moved = await api.change(id, subscription, other);
    await bothSee('moved to the other plan', { used: 9, limit: 20, allowed: true });
    expect((await consume(urls[1]!, id, 1)).json()).toMatchObject({ allowed: true, used: 10 });

    await api.cancel(id, moved);
    await bothSee('cancelled', { used: 10, limit: 0, allowed: false });
    await waitPersisted(id, 10);
  }, 120_000);

  it('applies a correction on the next consume of both gateways and sends each threshold once', async () => {
    const port = await receiver.listen();
    await api.send('PUT', '/org/webhook', { url: `http://127.0.0.1:${port}/hooks` }, 201);
    const plan = await meteredPlan({ limit: 10 });
    const { id } = await subscribed(plan);

    expect((await consume(urls[0]!, id, 5)).json()).toMatchObject({ used: 5 });
    const corrected = await call(urls[1]!, 'PUT', `/org/subscribers/${id}/usage/calls`, { used: 8 });
    expect(corrected.statusCode, JSON.stringify(corrected.json())).toBe(200);
    expect(corrected.json()).toMatchObject({ used: 8 });
    expect((await consume(urls[0]!, id, 1)).json()).toMatchObject({ allowed: true, used: 9 });
    expect((await consume(urls[1]!, id, 1)).json()).toMatchObject({ allowed: true, used: 10 });
    expect((await consume(urls[0]!, id, 1)).json()).toMatchObject({ allowed: false, used: 10 });
    await waitPersisted(id, 10);

    const thresholds = () =>
      receiver
        .at('/hooks')
        .map((message) => JSON.parse(message.body) as { type: string; data: Record<string, unknown> })
        .filter((event) => event.type === 'usage.threshold_reached' && event.data.subscriber_id === id);
    await waitFor(async () => thresholds().length >= 2, 'two threshold webhooks', PERSIST_MS);
    // A lowered figure and consumes up to the limit again within the period send nothing more.
    expect((await call(urls[0]!, 'PUT', `/org/subscribers/${id}/usage/calls`, { used: 2 })).statusCode).toBe(200);
    expect((await consume(urls[1]!, id, 8)).json()).toMatchObject({ allowed: true, used: 10 });
    await waitPersisted(id, 10);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(thresholds().map((event) => event.data.threshold).sort()).toEqual([100, 80]);
  }, 120_000);

  it('takes reports while evals are stopped, and refuses the consumes as evals', async () => {
    const blocked = await createTestOrganization(db, 'Metered blocked');
    await saveArrangement(db, blocked.organization_id, {
      plan: null,
      evalLimit: 1,
      blocking: true,
      burstPerSecond: 100_000,
    });
    const blockedApi = catalogClient(httpClient(urls[0]!), blocked.headers);
    await blockedApi.meteredSubscriber('ann', 'calls', 'p', 100);
    const as = (url: string, method: string, path: string, payload?: unknown) =>
      httpClient(url)({ method, url: path, headers: blocked.headers, payload });
    expect((await as(urls[0]!, 'POST', '/org/subscribers/ann/entitlements/check', { feature: 'calls', consume: 1 })).statusCode).toBe(200);
    // The month reached its limit more than the grace period ago: evals are stopped.
    const month = new Date().toISOString().slice(0, 7);
    await redis.hset(keys.evalUsage(blocked.organization_id, month), 'first_over_at', String(Date.now() - 8 * 86_400_000));

    for (const url of urls) {
      const refused = await as(url, 'POST', '/org/subscribers/ann/entitlements/check', { feature: 'calls', consume: 1 });
      expect(refused.statusCode, JSON.stringify(refused.json())).toBe(409);
    }
    const report = await as(urls[1]!, 'POST', '/org/subscribers/ann/usage', { feature: 'calls', delta: 5 });
    expect(report.statusCode, JSON.stringify(report.json())).toBe(200);
    expect(report.json()).toMatchObject({ used: 6 });
    const batch = await as(urls[0]!, 'POST', '/org/usage-events', {
      events: [{ subscriber_id: 'ann', feature: 'calls', delta: 2 }],
    });
    expect(batch.statusCode).toBe(200);
    expect(batch.json().results).toEqual([expect.objectContaining({ used: 8 })]);
    const read = await as(urls[1]!, 'GET', '/org/subscribers/ann/usage');
    expect(read.statusCode).toBe(200);
    expect(read.json().usage).toEqual([expect.objectContaining({ used: 8 })]);
  }, 120_000);

  it('refills a Redis that came back empty with the persisted figure and the gateway\u2019s larger one, never over the limit', async () => {
    const limit = 12;
    const plan = await meteredPlan({ limit });
    const persisted = await subscribed(plan);
    const seenOnly = await subscribed(plan);
    expect((await consume(urls[0]!, persisted.id, 5)).json()).toMatchObject({ used: 5 });
    expect((await consume(urls[1]!, seenOnly.id, 3)).json()).toMatchObject({ used: 3 });
    await waitPersisted(persisted.id, 5);
    await waitPersisted(seenOnly.id, 3);
    // The worker stops: what gateway A consumes now is known only to Redis and to gateway A.
    await worker?.stop();
    worker = undefined;
    expect((await consume(urls[0]!, seenOnly.id, 4)).json()).toMatchObject({ used: 7 });

    await redisServer.stop();
    expect((await consume(urls[1]!, persisted.id, 1)).statusCode).toBe(503);
    redisServer = startRedis(redisPort);
    await ownRedisAnswers(redisServer, redisPort);
    await waitFor(async () => (await redis.ping()) === 'PONG', 'the test client back on Redis');
    expect(await redis.exists(keys.meteredReady(org.organization_id))).toBe(0);
    startWorker();

    // Gateway A refills (it holds the larger figure of seenOnly); until then no metered answer is given.
    await waitFor(async () => (await consume(urls[0]!, seenOnly.id, 0)).statusCode === 200, 'metered answers on A', 60_000);
    expect(await redis.get(keys.meteredReady(org.organization_id))).toBe('1');
    expect(await usedOn(urls[1]!, persisted.id)).toBe(5);
    expect(await usedOn(urls[1]!, seenOnly.id)).toBe(7);

    // Both gateways consume to the limit: what is allowed is exactly what was left.
    for (const subscriber of [persisted, seenOnly]) {
      const before = await usedOn(urls[0]!, subscriber.id);
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => consume(urls[i % 2]!, subscriber.id, 1)));
      expect(answers.filter((answer) => answer.json().allowed === true)).toHaveLength(limit - before);
      expect(await usedOn(urls[1]!, subscriber.id)).toBe(limit);
      await waitPersisted(subscriber.id, limit);
    }
  }, 180_000);
});
