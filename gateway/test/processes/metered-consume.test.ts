import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createDb } from '@ent/common/db/connect';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createRedis } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import type { CatalogDoc, MeteredGrant } from '@ent/common/snapshots/documents';
import { snapshotStore } from '@ent/common/snapshots/store';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
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
 * Consumes of one balance spread over two gateway processes (DESIGN.md §5): a hard limit is never exceeded and never
 * under-used, an idempotent consume is applied once whichever gateway gets the repeat, and a Redis restarted empty is
 * refilled before metered answers resume. Catalog and subscriber documents are written to Redis as the snapshot
 * builder publishes them, at versions past admin's.
 */
let database: TestDatabase;
let redisServer: Started;
let redisPort: number;
let admin: Started;
let gateways: Started[] = [];
let urls: string[];
let db: ReturnType<typeof createDb>;
let redis: Redis;
let org: TestOrganization;
const prefix = testRedisPrefix();
const keys = redisKeys(prefix);
let catalogVersion = 1000;
let subscriberVersion = 1000;
const plans: Record<string, { archived: boolean; grants: Record<string, MeteredGrant> }> = {};
const subscribers: Record<string, string> = {};

const store = () => snapshotStore(redis as unknown as ReturnType<typeof createRedis>, keys);

async function publishCatalog(): Promise<void> {
  const doc = { features: { calls: 'metered', sso: 'flag' }, plans } as unknown as CatalogDoc;
  await store().putCatalog(org.organization_id, { version: ++catalogVersion, doc });
}
async function publishSubscriber(id: string, plan: string): Promise<void> {
  await store().putSubscriber(org.organization_id, id, {
    version: ++subscriberVersion,
    doc: { exists: true, plans: [plan], overrides: {} },
  });
}

let subscriberCount = 0;
/** A new subscriber on a plan of its own granting `calls` with these terms. */
async function subscriberWith(limit: number | null, soft: boolean): Promise<string> {
  const id = `s${subscriberCount++}`;
  const res = await httpClient(urls[0]!)({
    method: 'POST',
    url: '/org/subscribers',
    headers: org.headers,
    payload: { subscriber_id: id, name: id },
  });
  if (res.statusCode !== 201) throw new Error(`subscriber: ${res.statusCode}`);
  plans[`p_${id}`] = {
    archived: false,
    grants: { calls: { kind: 'metered', limit, reset: 'never', anchor: 'calendar', soft } },
  };
  subscribers[id] = `p_${id}`;
  await publishCatalog();
  await publishSubscriber(id, `p_${id}`);
  return id;
}

const consume = (url: string, subscriber: string, n: number, idempotencyKey?: string) =>
  httpClient(url)({
    method: 'POST',
    url: `/org/subscribers/${subscriber}/entitlements/check`,
    headers: { ...org.headers, ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
    payload: n === 0 ? { feature: 'calls' } : { feature: 'calls', consume: n },
  });

beforeAll(async () => {
  database = await createTestDatabase();
  ({ server: redisServer, port: redisPort } = await startOwnRedis());
  const { env, adminUrl } = await serviceEnv({ database, redisPort, prefix });
  redis = new Redis(env.REDIS_URL!, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  admin = startNode('admin/src/server.ts', env);
  await healthy(adminUrl);
  ({ gateways, urls } = await startGateways(env, 2));
  db = createDb(database.appUrl, { max: 2 });
  org = await createTestOrganization(db, 'Metered processes');
  await saveArrangement(db, org.organization_id, {
    plan: null,
    evalLimit: null,
    blocking: false,
    burstPerSecond: 100_000,
  });
}, 90_000);

afterAll(async () => {
  await Promise.all([...gateways, admin].filter(Boolean).map((p) => p.stop()));
  await redisServer?.stop();
  redis?.disconnect();
  await db?.destroy();
  await database?.drop();
}, 60_000);

describe('metered consumes on two gateway processes', () => {
  it('applies exactly what fits: a hard limit is never passed nor left unused; soft and unlimited take everything', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('hard', 'hard', 'soft', 'unlimited'),
        fc.integer({ min: 0, max: 12 }),
        fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 24 }),
        async (terms, limit, sizes) => {
          const subscriber = await subscriberWith(terms === 'unlimited' ? null : limit, terms === 'soft');
          const answers = await Promise.all(sizes.map((n, i) => consume(urls[i % 2]!, subscriber, n)));
          for (const answer of answers) expect(answer.statusCode).toBe(200);
          const allowed = answers.map((answer) => answer.json().allowed as boolean);
          const granted = sizes.reduce((sum, n, i) => sum + (allowed[i] ? n : 0), 0);
          const final = (await consume(urls[1]!, subscriber, 0)).json();
          expect(final.used).toBe(granted);
          if (terms === 'hard') {
            expect(granted).toBeLessThanOrEqual(limit);
            // Each refused consume did not fit even the final figure: nothing was refused that could have been taken.
            sizes.forEach((n, i) => {
              if (!allowed[i]) expect(granted + n).toBeGreaterThan(limit);
            });
            if (sizes.every((n) => n === 1)) expect(granted).toBe(Math.min(sizes.length, limit));
          } else {
            expect(allowed.every(Boolean)).toBe(true);
            expect(granted).toBe(sizes.reduce((a, b) => a + b, 0));
          }
        },
      ),
      { numRuns: 12 },
    );
  }, 120_000);

  it('applies an idempotent consume once when its repeats go to the other gateway', async () => {
    const subscriber = await subscriberWith(100, false);
    const answers = await Promise.all([0, 1, 0, 1].map((g) => consume(urls[g]!, subscriber, 7, 'same-key')));
    expect(answers.map((answer) => answer.json().used)).toEqual([7, 7, 7, 7]);
    expect(answers.filter((answer) => answer.headers['idempotent-replayed'] === 'true')).toHaveLength(3);
    expect((await consume(urls[0]!, subscriber, 0)).json().used).toBe(7);
  }, 30_000);

  it('deducts nothing for a consume answered 503 while Redis was paused, although its call runs when Redis resumes', async () => {
    const subscriber = await subscriberWith(10, false);
    // Warm: the consume below rides in the gate call itself, which the paused Redis holds on its socket.
    expect((await consume(urls[0]!, subscriber, 2)).json()).toMatchObject({ used: 2, allowed: true });
    const redisPid = redisServer.child.pid!;
    process.kill(redisPid, 'SIGSTOP');
    let paused;
    try {
      paused = await consume(urls[0]!, subscriber, 3);
    } finally {
      process.kill(redisPid, 'SIGCONT');
    }
    expect(paused.statusCode).toBe(503);
    await waitFor(
      async () => (await consume(urls[0]!, subscriber, 0)).statusCode === 200,
      'the gateway answering metered reads again',
    );
    expect((await consume(urls[1]!, subscriber, 0)).json()).toMatchObject({ used: 2 });
  }, 30_000);

  it('answers 503 to consumes while Redis is down (flags fail open), and refills an empty Redis before answering again', async () => {
    const subscriber = await subscriberWith(10, false);
    expect((await consume(urls[0]!, subscriber, 6)).json()).toMatchObject({ used: 6, allowed: true });
    // Warm the flag path of both gateways for the fail-open check.
    const flag = (url: string) =>
      httpClient(url)({
        method: 'POST',
        url: `/org/subscribers/${subscriber}/entitlements/check`,
        headers: org.headers,
        payload: { feature: 'sso' },
      });
    expect((await flag(urls[0]!)).statusCode).toBe(200);

    await redisServer.stop();
    const down = await consume(urls[0]!, subscriber, 1);
    expect(down.statusCode).toBe(503);
    expect(down.json().error.code).toBe('SERVICE_UNAVAILABLE');
    expect(down.headers['retry-after']).toBeDefined();
    expect((await flag(urls[0]!)).statusCode).toBe(200);

    redisServer = startRedis(redisPort);
    await ownRedisAnswers(redisServer, redisPort);
    await waitFor(async () => (await redis.ping()) === 'PONG', 'the test client back on Redis');
    // The snapshot builder would republish these; admin's own (without metered grants) must not win.
    await publishCatalog();
    for (const [id, plan] of Object.entries(subscribers)) await publishSubscriber(id, plan);
    await waitFor(
      async () => (await consume(urls[0]!, subscriber, 0)).statusCode === 200,
      'the gateway back on Redis',
    );
    // Nothing was persisted (no worker runs here): gateway 0's own last figure is what the refill puts back.
    expect(await redis.get(keys.meteredReady(org.organization_id))).toBe('1');
    expect((await consume(urls[1]!, subscriber, 5)).json()).toMatchObject({ used: 6, allowed: false });
    expect((await consume(urls[1]!, subscriber, 4)).json()).toMatchObject({ used: 10, allowed: true });
  }, 90_000);
});
