import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createDb } from '@ent/common/db/connect';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { catalogClient } from '../helpers.ts';
import {
  healthy,
  startNode,
  waitFor,
  type Started,
  httpClient,
  serviceEnv,
  startGateways,
  ownRedisAnswers,
  startRedis,
  startOwnRedis,
} from '../processes.ts';

/**
 * The failure the outbox exists for, with real processes: a write committed while Redis is down, admin killed
 * before it could publish, Redis back with its old data. Every gateway must end up serving the write, and a key
 * revoked in that window must be refused, without anyone touching anything.
 */
let database: TestDatabase;
let redisDir: string;
let redisPort: number;
let redisServer: Started | undefined;
let admin: Started | undefined;
let worker: Started | undefined;
const gateways: Started[] = [];
let env: Record<string, string>;
let urls: string[];
let adminUrl: string;
let db: ReturnType<typeof createDb>;
const prefix = testRedisPrefix();
const CONVERGE_MS = 15_000;

const startRedisWithData = async () => {
  redisServer = startRedis(redisPort, ['--dir', redisDir]);
  await ownRedisAnswers(redisServer, redisPort);
};

/** A clean stop that keeps the data (an RDB in redisDir), so the next start comes back with it. */
const stopRedisKeepingData = async () => {
  const client = new Redis(env.REDIS_URL!, { maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  await client.shutdown('SAVE').catch(() => undefined);
  client.disconnect();
  await redisServer?.stop();
  redisServer = undefined;
};

const killHard = async (process: Started | undefined) => {
  if (!process?.child.pid || process.child.exitCode !== null) return;
  const exited = new Promise((resolve) => process.child.once('exit', resolve));
  process.child.kill('SIGKILL');
  await exited;
};

const http = httpClient;

const check = (base: string, org: TestOrganization, subscriber: string, key = org.api_key) =>
  http(base)({
    method: 'POST',
    url: `/org/subscribers/${subscriber}/entitlements/check`,
    headers: { 'x-api-key': key },
    payload: { feature: 'seats' },
  });

async function allGatewaysAgree(
  org: TestOrganization,
  subscriber: string,
  limit: number,
  revokedKey: string,
): Promise<boolean> {
  for (const url of urls) {
    const answer = await check(url, org, subscriber);
    if (answer.statusCode !== 200 || answer.json().limit !== limit) return false;
    if ((await check(url, org, subscriber, revokedKey)).statusCode !== 401) return false;
  }
  return true;
}

const startAdmin = async () => {
  admin = startNode('admin/src/server.ts', env);
  await healthy(adminUrl);
};

/** An organization whose subscriber `ann` and check key are warm on both gateways. */
async function warmOrganization(name: string) {
  const org = await createTestOrganization(db, name);
  await saveArrangement(db, org.organization_id, {
    plan: null,
    evalLimit: null,
    blocking: false,
    burstPerSecond: 100_000,
  });
  const api = catalogClient(http(urls[0]!), org.headers);
  await api.feature('seats', 'limit');
  await api.plan('basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
  await api.subscriber('ann');
  await api.subscribe('ann', 'basic');
  const key = await createKeyWithScopes(db, org.organization_id, ['check']);
  for (const url of urls) {
    expect((await check(url, org, 'ann')).json().limit).toBe(3);
    expect((await check(url, org, 'ann', key.apiKey)).statusCode).toBe(200);
  }
  return { org, api, key };
}

/** With Redis down: an override and a key revocation are committed (2xx), then admin dies before publishing. */
async function commitWhileRedisIsDownThenKillAdmin(
  org: TestOrganization,
  key: { serviceAccountId: string; keyId: string },
) {
  await stopRedisKeepingData();
  const override = await http(urls[0]!)({
    method: 'PUT',
    url: '/org/subscribers/ann/overrides/seats',
    headers: org.headers,
    payload: { kind: 'limit', limit: 500 },
  });
  expect(override.statusCode).toBe(200);
  const revoke = await http(urls[1]!)({
    method: 'DELETE',
    url: `/org/service-accounts/${key.serviceAccountId}/api-keys/${key.keyId}`,
    headers: org.headers,
  });
  expect(revoke.statusCode).toBe(204);
  await killHard(admin);
  await startRedisWithData();
}

beforeAll(async () => {
  database = await createTestDatabase();
  redisDir = mkdtempSync(join(tmpdir(), 'ent-outbox-redis-'));
  ({ server: redisServer, port: redisPort } = await startOwnRedis(['--dir', redisDir]));
  ({ env, adminUrl } = await serviceEnv({ database, redisPort, prefix, logLevel: 'warn' }));
  await startAdmin();
  const started = await startGateways(env, 2);
  gateways.push(...started.gateways);
  urls = started.urls;
  db = createDb(database.appUrl, { max: 2 });
}, 90_000);

afterAll(async () => {
  await Promise.all(
    [...gateways, worker, admin].filter((p): p is Started => Boolean(p)).map((p) => p.stop()),
  );
  await redisServer?.stop();
  await db?.destroy();
  await database?.drop();
  rmSync(redisDir, { recursive: true, force: true });
}, 60_000);

describe('a write committed while Redis is down, then admin killed (kill -9), then Redis back with its old data', () => {
  it('reaches every gateway when admin starts again (its relay pass), the revoked key included', async () => {
    const { org, key } = await warmOrganization('Admin restarts');
    await commitWhileRedisIsDownThenKillAdmin(org, key);
    // Nobody has published the committed writes: Redis holds the old versions, so the gateways still agree
    // with their caches. Admin's start publishes the outbox.
    await startAdmin();
    await waitFor(
      () => allGatewaysAgree(org, 'ann', 500, key.apiKey),
      'both gateways to serve the override and refuse the key',
      CONVERGE_MS,
    );
    const undone = await db
      .selectFrom('outbox')
      .select('id')
      .where('organization_id', '=', org.organization_id)
      .where('done_at', 'is', null)
      .execute();
    expect(undone).toEqual([]);
  });

  it("reaches every gateway through the worker's relay while admin stays down", async () => {
    worker = startNode('admin/src/worker.ts', env);
    await waitFor(async () => worker!.output().includes('outbox relay'), 'the worker to start', 20_000);
    const { org, key } = await warmOrganization('Worker relays');
    await commitWhileRedisIsDownThenKillAdmin(org, key);
    await waitFor(
      () => allGatewaysAgree(org, 'ann', 500, key.apiKey),
      'both gateways to serve the override and refuse the key',
      CONVERGE_MS,
    );
    await startAdmin();
  });
});
