import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createDb } from '@ent/common/db/connect';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { GRACE_PERIOD_MS, periodOf } from '@ent/common/metering/period';
import { redisKeys } from '@ent/common/redis/keys';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { KEY_CONFIRMATION_MS } from '../../src/plugins/principals.ts';
import { catalogClient } from '../helpers.ts';
import {
  freePort,
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
 * Fail-open under Redis faults, with real processes (one admin, two gateways) against a Redis this file starts
 * itself, so it can pause (SIGSTOP) and stop it: the count stays exact, a blocked organization stays blocked,
 * and a revocation wins within KEY_CONFIRMATION_MS.
 */
let database: TestDatabase;
let redisPort: number;
let redisServer: Started;
let admin: Started;
const gateways: Started[] = [];
let env: Record<string, string>;
let urls: string[];
let adminUrl: string;
let org: TestOrganization;
let blockedOrg: TestOrganization;
let db: ReturnType<typeof createDb>;
let redis: Redis;
const prefix = testRedisPrefix();
const keys = redisKeys(prefix);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const http = httpClient;

const check = (base: string, subscriber: string, feature: string, key = org.api_key) =>
  http(base)({
    method: 'POST',
    url: `/org/subscribers/${subscriber}/entitlements/check`,
    headers: { 'x-api-key': key },
    payload: { feature },
  });
const usageCount = async (base: string) =>
  (await http(base)({ method: 'GET', url: '/org/usage/current', headers: org.headers })).json()
    .count as number;
/** The first gateway's operations port (/metrics is not on the public one). */
let metricsUrl: string;
const pendingSettlements = async (metricsBase = metricsUrl) => {
  const text = await (await fetch(`${metricsBase}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('gateway_offline_evals_pending '));
  return Number(line?.split(' ')[1] ?? NaN);
};
const startAdmin = async () => {
  admin = startNode('admin/src/server.ts', env);
  await healthy(adminUrl);
};
const startOurRedis = async () => {
  redisServer = startRedis(redisPort);
  await ownRedisAnswers(redisServer, redisPort);
  redis = new Redis(env.REDIS_URL!, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  await waitFor(async () => (await redis.ping()) === 'PONG', 'redis-server');
};

beforeAll(async () => {
  database = await createTestDatabase();
  ({ server: redisServer, port: redisPort } = await startOwnRedis());
  ({ env, adminUrl } = await serviceEnv({ database, redisPort, prefix, logLevel: 'error' }));
  redis = new Redis(env.REDIS_URL!, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  await startAdmin();
  const metricsPort = await freePort();
  metricsUrl = `http://127.0.0.1:${metricsPort}`;
  const first = await startGateways({ ...env, GATEWAY_METRICS_PORT: String(metricsPort) }, 1);
  const second = await startGateways(env, 1);
  gateways.push(...first.gateways, ...second.gateways);
  urls = [...first.urls, ...second.urls];

  db = createDb(database.appUrl, { max: 2 });
  org = await createTestOrganization(db, 'Fail-open org');
  await saveArrangement(db, org.organization_id, {
    plan: 'free',
    evalLimit: 100_000,
    blocking: true,
    burstPerSecond: 100_000,
  });
  const api = catalogClient(http(urls[0]!), org.headers);
  await api.feature('seats', 'limit');
  await api.plan('basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
  // 'never-cached' is evaluated by no case before Redis is paused: the gateway cannot answer it then.
  for (const subscriber of ['warm', 'cold', 'never-cached']) {
    await api.subscriber(subscriber);
    await api.subscribe(subscriber, 'basic');
  }

  blockedOrg = await createTestOrganization(db, 'Blocked org');
  await saveArrangement(db, blockedOrg.organization_id, {
    plan: 'free',
    evalLimit: 5,
    blocking: true,
    burstPerSecond: 100_000,
  });
  const blockedApi = catalogClient(http(urls[0]!), blockedOrg.headers);
  await blockedApi.feature('seats', 'limit');
  await blockedApi.subscriber('warm');
}, 90_000);

afterAll(async () => {
  await Promise.all([...gateways, admin].filter(Boolean).map((p) => p.stop()));
  await redisServer?.stop();
  redis?.disconnect();
  await db?.destroy();
  await database?.drop();
}, 60_000);

describe('fail-open under Redis faults', () => {
  it('with Redis paused past the command timeout, then resumed: the count equals the 2xx evals exactly', async () => {
    const url = urls[0]!;
    expect((await check(url, 'warm', 'seats')).statusCode).toBe(200);
    const before = await usageCount(url);

    const statuses: number[] = [];
    const redisPid = redisServer.child.pid!;
    process.kill(redisPid, 'SIGSTOP');
    try {
      // Each round's gate calls reach the paused Redis (they run when it resumes) and time out meanwhile.
      for (let round = 0; round < 3; round++) {
        const answers = await Promise.all([
          ...Array.from({ length: 5 }, () => check(url, 'warm', 'seats')),
          check(url, 'warm', 'no-such-feature'),
          check(url, 'never-cached', 'seats'),
        ]);
        statuses.push(...answers.map((res) => res.statusCode));
      }
    } finally {
      process.kill(redisPid, 'SIGCONT');
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(15);
    expect(statuses.filter((s) => s === 404)).toHaveLength(3);
    expect(statuses.filter((s) => s === 503)).toHaveLength(3);

    // The gauge may still read 0 from before the pause (no settle round ran during it): wait for the count itself.
    await waitFor(async () => (await usageCount(url)) === before + 15, 'every failed gate call settled');
    // Nothing is applied twice by later settle rounds.
    await sleep(2500);
    expect(await pendingSettlements()).toBe(0);
    expect(await usageCount(url)).toBe(before + 15);
  }, 60_000);

  it('exits on SIGTERM within its deadline when the last settlements cannot reach a paused Redis', async () => {
    const port = await freePort();
    const opsPort = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const gateway = startNode('gateway/src/server.ts', {
      ...env,
      GATEWAY_PORT: String(port),
      GATEWAY_METRICS_PORT: String(opsPort),
      SHUTDOWN_TIMEOUT_MS: '60000',
    });
    try {
      await healthy(url);
      expect((await check(url, 'warm', 'seats')).statusCode).toBe(200);
      const redisPid = redisServer.child.pid!;
      process.kill(redisPid, 'SIGSTOP');
      try {
        expect((await check(url, 'warm', 'seats')).statusCode).toBe(200);
        await waitFor(
          async () => (await pendingSettlements(`http://127.0.0.1:${opsPort}`)) > 0,
          'a settlement pending',
          5000,
        );
        const exited = new Promise<number | null>((resolve) =>
          gateway.child.once('exit', (code) => resolve(code)),
        );
        process.kill(gateway.child.pid!, 'SIGTERM');
        const code = await Promise.race([exited, sleep(15_000).then(() => 'still running')]);
        expect(code, gateway.output()).toBe(0);
        expect(gateway.output()).toContain('eval settlements not applied before shutdown');
      } finally {
        process.kill(redisPid, 'SIGCONT');
      }
    } finally {
      await gateway.stop();
    }
  }, 60_000);

  it('with Redis stopped: a blocked organization stays 409, a revoked key gets 401 within the bound, admin unreachable gets 503', async () => {
    const [viaA, viaB] = urls as [string, string];
    // Blocked: the month is over its limit and past its grace period.
    const now = Date.now();
    await redis.hset(keys.evalUsage(blockedOrg.organization_id, periodOf(now)), {
      count: '5',
      first_over_at: String(now - GRACE_PERIOD_MS - 1000),
    });
    const { apiKey, serviceAccountId, keyId } = await createKeyWithScopes(db, org.organization_id, ['check']);
    expect((await check(viaB, 'warm', 'seats', apiKey)).statusCode).toBe(200);
    expect((await check(viaB, 'warm', 'seats')).statusCode).toBe(200);
    expect((await check(viaB, 'warm', 'seats', blockedOrg.api_key)).statusCode).toBe(409);

    await redisServer.stop();
    redis.disconnect();
    try {
      const blocked = await check(viaB, 'warm', 'seats', blockedOrg.api_key);
      expect(blocked.statusCode).toBe(409);
      expect(blocked.json().error.details).toEqual({ field: 'evals', value: periodOf(Date.now()) });

      const revoke = await http(viaA)({
        method: 'DELETE',
        url: `/org/service-accounts/${serviceAccountId}/api-keys/${keyId}`,
        headers: org.headers,
      });
      expect(revoke.statusCode).toBe(204);
      const revokedAt = Date.now();
      // Bounded wait: the bound, an admin round trip, and a margin.
      let status = 0;
      while (Date.now() - revokedAt < KEY_CONFIRMATION_MS + 5000) {
        status = (await check(viaB, 'warm', 'seats', apiKey)).statusCode;
        if (status === 401) break;
        expect(status).toBe(200);
        await sleep(250);
      }
      expect(status).toBe(401);
      expect(Date.now() - revokedAt).toBeLessThan(KEY_CONFIRMATION_MS + 5000);
      // A key admin still confirms (from Postgres, Redis being down) keeps answering from memory.
      const confirmed = await check(viaB, 'warm', 'seats');
      expect(confirmed.statusCode).toBe(200);

      await admin.stop();
      const adminStoppedAt = Date.now();
      while (Date.now() - adminStoppedAt < KEY_CONFIRMATION_MS + 5000) {
        status = (await check(viaB, 'warm', 'seats')).statusCode;
        if (status === 503) break;
        expect(status).toBe(200);
        await sleep(250);
      }
      expect(status).toBe(503);
    } finally {
      await admin.stop();
      await startAdmin();
      await startOurRedis();
    }
    // Both gateways answer again before the next case, whichever it is.
    for (const url of [viaA, viaB]) {
      await waitFor(
        async () => (await check(url, 'warm', 'seats')).statusCode === 200,
        `evals answered again on ${url}`,
      );
    }
    expect((await check(viaB, 'warm', 'seats', apiKey)).statusCode).toBe(401);
  }, 90_000);
});
