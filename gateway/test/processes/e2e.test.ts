import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createDb } from '@ent/common/db/connect';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { redisKeys } from '@ent/common/redis/keys';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { catalogClient } from '../helpers.ts';
import {
  healthy,
  startNode,
  startRedis,
  waitFor,
  type Started,
  httpClient,
  serviceEnv,
  startGateways,
  ownRedisAnswers,
  startOwnRedis,
} from '../processes.ts';

/**
 * Real processes: one admin, one worker, two gateways, on free ports, against a test database and a Redis
 * this file starts itself (so it can be stopped and flushed).
 */
let database: TestDatabase;
let redisPort: number;
let redisServer: Started;
let admin: Started;
let worker: Started;
const gateways: Started[] = [];
let env: Record<string, string>;
let urls: string[];
let adminUrl: string;
let org: TestOrganization;
let db: ReturnType<typeof createDb>;
let redis: Redis;
const prefix = testRedisPrefix();
const keys = redisKeys(prefix);

const http = httpClient;

const check = (base: string, subscriber: string, feature: string, key = org.api_key) =>
  http(base)({
    method: 'POST',
    url: `/org/subscribers/${subscriber}/entitlements/check`,
    headers: { 'x-api-key': key },
    payload: { feature },
  });
const valueOn = async (base: string, subscriber: string, feature: string) => {
  const res = await check(base, subscriber, feature);
  if (res.statusCode !== 200)
    throw new Error(
      `${base} check ${subscriber}/${feature} -> ${res.statusCode} ${JSON.stringify(res.json())}`,
    );
  const body = res.json();
  return body.kind === 'flag'
    ? { allowed: body.allowed, source: body.source }
    : { limit: body.limit, source: body.source };
};
const onBoth = (subscriber: string, feature: string) =>
  Promise.all(urls.map((url) => valueOn(url, subscriber, feature)));

const startAdmin = async () => {
  admin = startNode('admin/src/server.ts', env);
  await healthy(adminUrl);
};

beforeAll(async () => {
  database = await createTestDatabase();
  ({ server: redisServer, port: redisPort } = await startOwnRedis());
  ({ env, adminUrl } = await serviceEnv({ database, redisPort, prefix }));
  redis = new Redis(env.REDIS_URL!, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  await waitFor(async () => (await redis.ping()) === 'PONG', 'redis-server');
  await startAdmin();
  worker = startNode('admin/src/worker.ts', env);
  const started = await startGateways(env, 2);
  gateways.push(...started.gateways);
  urls = started.urls;

  db = createDb(database.appUrl, { max: 2 });
  org = await createTestOrganization(db, 'E2E org');
  await saveArrangement(db, org.organization_id, {
    plan: 'free',
    evalLimit: 100_000,
    blocking: true,
    burstPerSecond: 100_000,
  });
  const api = catalogClient(http(urls[0]!), org.headers);
  await api.feature('sso', 'flag');
  await api.feature('seats', 'limit');
  await api.plan('basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
  await api.plan('pro', [
    { feature: 'sso', kind: 'flag' },
    { feature: 'seats', kind: 'limit', limit: 25 },
  ]);
}, 90_000);

afterAll(async () => {
  await Promise.all([...gateways, worker, admin].filter(Boolean).map((p) => p.stop()));
  await redisServer?.stop();
  redis?.disconnect();
  await db?.destroy();
  await database?.drop();
}, 60_000);

describe('read-your-writes on two gateway processes', () => {
  it('shows each write on the very next eval on both gateways', async () => {
    // Writes alternate between the gateways (forwarded to admin); both gateways hold the old answer warm.
    const viaA = catalogClient(http(urls[0]!), org.headers);
    const viaB = catalogClient(http(urls[1]!), org.headers);
    await viaA.subscriber('ann');
    expect(await onBoth('ann', 'seats')).toEqual([
      { limit: 0, source: 'none' },
      { limit: 0, source: 'none' },
    ]);

    const basic = await viaB.subscribe('ann', 'basic');
    expect(await onBoth('ann', 'seats')).toEqual(Array(2).fill({ limit: 3, source: 'plan' }));

    await viaA.grants('basic', [{ feature: 'seats', kind: 'limit', limit: 7 }]);
    expect(await onBoth('ann', 'seats')).toEqual(Array(2).fill({ limit: 7, source: 'plan' }));

    await viaB.override('ann', 'seats', { kind: 'limit', limit: 1000 });
    expect(await onBoth('ann', 'seats')).toEqual(Array(2).fill({ limit: 1000, source: 'override' }));

    await viaA.deleteOverride('ann', 'seats');
    expect(await onBoth('ann', 'seats')).toEqual(Array(2).fill({ limit: 7, source: 'plan' }));

    const pro = await viaB.change('ann', basic, 'pro');
    expect(await onBoth('ann', 'sso')).toEqual(Array(2).fill({ allowed: true, source: 'plan' }));
    expect(await onBoth('ann', 'seats')).toEqual(Array(2).fill({ limit: 25, source: 'plan' }));

    await viaA.cancel('ann', pro);
    expect(await onBoth('ann', 'sso')).toEqual(Array(2).fill({ allowed: false, source: 'none' }));
    expect(await onBoth('ann', 'seats')).toEqual(Array(2).fill({ limit: 0, source: 'none' }));
  });

  it('shows each write on the very next eval where both gateways verified the entry at the current stamp', async () => {
    // Evaluated twice since the last write, an entry is trusted: the gate call reads no subscriber version for it
    // until the organization's subscriber-write stamp moves. Every write must move it.
    const viaA = catalogClient(http(urls[0]!), org.headers);
    const viaB = catalogClient(http(urls[1]!), org.headers);
    // A plan of its own: the other cases change basic's grants.
    await viaA.plan('starter', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
    await viaA.subscriber('tess');
    await viaB.subscribe('tess', 'starter');
    const warmTwice = async () => {
      await onBoth('tess', 'seats');
      return onBoth('tess', 'seats');
    };
    expect(await warmTwice()).toEqual(Array(2).fill({ limit: 3, source: 'plan' }));

    await viaA.override('tess', 'seats', { kind: 'limit', limit: 11 });
    expect(await onBoth('tess', 'seats')).toEqual(Array(2).fill({ limit: 11, source: 'override' }));
    expect(await warmTwice()).toEqual(Array(2).fill({ limit: 11, source: 'override' }));

    // Another subscriber's write moves the stamp too: tess's version is read again, and is still current.
    await viaB.subscriber('uma');
    expect(await warmTwice()).toEqual(Array(2).fill({ limit: 11, source: 'override' }));

    await viaB.deleteOverride('tess', 'seats');
    expect(await onBoth('tess', 'seats')).toEqual(Array(2).fill({ limit: 3, source: 'plan' }));
  });

  it('refuses a revoked key on the very next request on both gateways', async () => {
    const subscriber = await ownSubscriber(4);
    const { apiKey, serviceAccountId, keyId } = await createKeyWithScopes(db, org.organization_id, ['check']);
    for (const url of urls) expect((await check(url, subscriber, 'seats', apiKey)).statusCode).toBe(200);
    const revoke = await http(urls[0]!)({
      method: 'DELETE',
      url: `/org/service-accounts/${serviceAccountId}/api-keys/${keyId}`,
      headers: org.headers,
    });
    expect(revoke.statusCode).toBe(204);
    for (const url of urls) {
      const res = await check(url, subscriber, 'seats', apiKey);
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('UNAUTHENTICATED');
    }
    for (const url of urls) expect((await check(url, subscriber, 'seats')).statusCode).toBe(200);
  });

  it('expires an override at expires_at on both gateways', async () => {
    const api = catalogClient(http(urls[0]!), org.headers);
    await api.subscriber('otto');
    await api.subscribe('otto', 'pro');
    const expiresAt = Date.now() + 1500;
    await api.override('otto', 'sso', {
      kind: 'flag',
      allowed: false,
      expires_at: new Date(expiresAt).toISOString(),
    });
    expect(await onBoth('otto', 'sso')).toEqual(Array(2).fill({ allowed: false, source: 'override' }));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt - Date.now()) + 5));
    expect(await onBoth('otto', 'sso')).toEqual(Array(2).fill({ allowed: true, source: 'plan' }));
  });

  it('leaves no committed change unpublished: every outbox entry is done', async () => {
    await waitFor(async () => {
      const undone = await db.selectFrom('outbox').select('id').where('done_at', 'is', null).execute();
      return undone.length === 0;
    }, 'every outbox entry done');
    const done = await db
      .selectFrom('outbox')
      .select('id')
      .where('organization_id', '=', org.organization_id)
      .execute();
    expect(done.length).toBeGreaterThan(0);
  });
});

describe('metering across gateway processes', () => {
  it('counts N concurrent evals spread over both gateways exactly N times; 404s are not counted', async () => {
    const arrangement = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        'admin/src/cli/entctl.ts',
        'org',
        'arrangement',
        '--org',
        org.organization_id,
        '--burst',
        '100000',
        '--json',
      ],
      { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 30_000 },
    );
    expect(arrangement.status, arrangement.stderr).toBe(0);
    const api = catalogClient(http(urls[0]!), org.headers);
    await api.subscriber('metered');
    await api.subscribe('metered', 'basic');
    const usageCount = async () =>
      (await http(urls[1]!)({ method: 'GET', url: '/org/usage/current', headers: org.headers })).json()
        .count as number;
    const before = await usageCount();

    const total = 300;
    const answers = await Promise.all(
      Array.from({ length: total }, (_, i) =>
        check(urls[i % 2]!, 'metered', i % 10 === 0 ? 'no-such-feature' : 'seats'),
      ),
    );
    const answered = answers.filter((res) => res.statusCode === 200).length;
    expect(answered).toBe(total - total / 10);
    expect(answers.filter((res) => res.statusCode === 404)).toHaveLength(total / 10);
    expect(await usageCount()).toBe(before + answered);
  });
});

let made = 0;
/**
 * A subscriber of its own on a plan of its own (`seats` limit, `sso` granted): each degraded case checks answers
 * nothing else changes, and starts from whatever state the other cases left.
 */
async function ownSubscriber(seats: number): Promise<string> {
  const api = catalogClient(http(urls[0]!), org.headers);
  const id = `degraded-${++made}`;
  await api.plan(`plan-${id}`, [
    { feature: 'sso', kind: 'flag' },
    { feature: 'seats', kind: 'limit', limit: seats },
  ]);
  await api.subscriber(id);
  await api.subscribe(id, `plan-${id}`);
  return id;
}

describe('degraded but up', () => {
  it('keeps answering with admin (and so Postgres) stopped: warm and Redis-held subscribers', async () => {
    const warm = await ownSubscriber(11);
    const held = await ownSubscriber(25); // in Redis, never evaluated: in no gateway's LRU
    await onBoth(warm, 'seats');
    await admin.stop();
    try {
      // The gateways have no database connection of their own: with admin gone, nothing can reach Postgres.
      for (let i = 0; i < 25; i++) {
        expect(await onBoth(warm, 'seats')).toEqual(Array(2).fill({ limit: 11, source: 'plan' }));
      }
      expect(await onBoth(held, 'seats')).toEqual(Array(2).fill({ limit: 25, source: 'plan' }));
      const write = await http(urls[1]!)({ method: 'GET', url: '/org/features', headers: org.headers });
      expect(write.statusCode).toBe(503);
      expect(write.json().error.code).toBe('SERVICE_UNAVAILABLE');
    } finally {
      await startAdmin();
    }
  });

  it('with Redis unreachable: cached subscribers answer, others 503, and the counts reach Redis when it returns', async () => {
    const warm = await ownSubscriber(12);
    const cold = await ownSubscriber(13);
    const url = urls[0]!;
    await valueOn(url, warm, 'seats');
    await redisServer.stop();
    redis.disconnect();
    const answered = 7;
    try {
      for (let i = 0; i < answered; i++) {
        const res = await check(url, warm, 'seats');
        expect(res.statusCode).toBe(200);
        expect(res.json()).toEqual({ feature: 'seats', kind: 'limit', limit: 12, source: 'plan' });
        expect(res.headers['x-svc-eval-used']).toBeUndefined();
      }
      const uncached = await check(url, cold, 'seats');
      expect(uncached.statusCode).toBe(503);
      expect(uncached.json().error).toMatchObject({ code: 'SERVICE_UNAVAILABLE', type: 'api_error' });
    } finally {
      redisServer = startRedis(redisPort); // comes back empty: the gateways rebuild from Postgres
      await ownRedisAnswers(redisServer, redisPort);
      redis = new Redis(env.REDIS_URL!, { maxRetriesPerRequest: 1 });
      redis.on('error', () => {});
      await waitFor(async () => (await redis.ping()) === 'PONG', 'redis-server back');
    }
    await waitFor(async () => {
      const usage = await http(url)({ method: 'GET', url: '/org/usage/current', headers: org.headers });
      return usage.statusCode === 200 && usage.json().count >= answered;
    }, 'offline evals counted in Redis');
    // Each gateway reconnects on its own backoff, and one still without Redis rightly answers an uncached
    // subscriber 503: the cold eval waits until both say they are ready again.
    await waitFor(async () => {
      const probes = await Promise.all(urls.map((base) => http(base)({ method: 'GET', url: '/readyz' })));
      return probes.every((probe) => probe.statusCode === 200);
    }, 'both gateways connected to Redis again');
    expect(await onBoth(cold, 'seats')).toEqual(Array(2).fill({ limit: 13, source: 'plan' }));
  });

  it('rebuilds the right answers from Postgres after Redis was flushed', async () => {
    const cached = await ownSubscriber(14);
    const never = await ownSubscriber(15);
    await onBoth(cached, 'seats');
    await redis.flushall();
    expect(await onBoth(cached, 'seats')).toEqual(Array(2).fill({ limit: 14, source: 'plan' }));
    expect(await onBoth(never, 'seats')).toEqual(Array(2).fill({ limit: 15, source: 'plan' }));
    expect(await onBoth(never, 'sso')).toEqual(Array(2).fill({ allowed: true, source: 'plan' }));
  });

  it('entctl snapshots rebuild writes every document back', async () => {
    const rebuilt = await ownSubscriber(16);
    const subscribers = await db
      .selectFrom('subscribers')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('organization_id', '=', org.organization_id)
      .executeTakeFirstOrThrow();
    await redis.flushall();
    const result = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        'admin/src/cli/entctl.ts',
        'snapshots',
        'rebuild',
        '--org',
        org.organization_id,
        '--json',
      ],
      { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 30_000 },
    );
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ organizations: 1, subscribers: Number(subscribers.n) });
    expect(await redis.hget(keys.subscriber(org.organization_id, rebuilt), 'v')).not.toBeNull();
    expect(await redis.hget(keys.catalog(org.organization_id), 'v')).not.toBeNull();
    expect(await onBoth(rebuilt, 'seats')).toEqual(Array(2).fill({ limit: 16, source: 'plan' }));
  });

  it('with Redis paused (hung, not refusing): evals and writes still answer, and both gateways catch up when it resumes', async () => {
    const paula = await ownSubscriber(17);
    expect(await onBoth(paula, 'seats')).toEqual(Array(2).fill({ limit: 17, source: 'plan' }));

    const redisPid = redisServer.child.pid!;
    process.kill(redisPid, 'SIGSTOP');
    try {
      // Warm subscribers fail open after the command timeout instead of waiting for Redis.
      expect(await valueOn(urls[0]!, paula, 'seats')).toEqual({ limit: 17, source: 'plan' });
      // Writes are committed and audited in Postgres; the write-through waits for nothing.
      const write = await http(urls[1]!)({
        method: 'PUT',
        url: `/org/subscribers/${paula}/overrides/seats`,
        headers: org.headers,
        payload: { kind: 'limit', limit: 99 },
      });
      expect(write.statusCode).toBe(200);
    } finally {
      process.kill(redisPid, 'SIGCONT');
    }
    // The worker's outbox relay publishes the committed change once Redis answers again.
    await waitFor(
      async () =>
        JSON.stringify(await onBoth(paula, 'seats')) ===
        JSON.stringify(Array(2).fill({ limit: 99, source: 'override' })),
      'the override on both gateways after Redis resumes',
    );
  });
});
