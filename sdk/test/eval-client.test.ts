import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '@ent/common/db/connect';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createTestOrganization, type TestOrganization } from '../../test-support/admin-context.ts';
import { testRedisPrefix } from '../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../test-support/databases.ts';
import { catalogClient } from '../../gateway/test/helpers.ts';
import {
  healthy,
  httpClient,
  serviceEnv,
  startGateways,
  startNode,
  startOwnRedis,
  waitFor,
  type Started,
} from '../../gateway/test/processes.ts';
import { EntitlementsError, EvalClient, type EvalClientOptions } from '../src/index.ts';
import { countingProxy } from './counting-proxy.ts';
import { readmeExample } from '../examples/readme.ts';

/** Real processes: admin, worker and one gateway on a Redis of this file; the SDK talks to a counting proxy. */
let database: TestDatabase;
let redisServer: Started;
const processes: Started[] = [];
let gateway: Started;
let gatewayUrl: string;
let env: Record<string, string>;
let org: TestOrganization;
let burstOrg: TestOrganization;
let db: ReturnType<typeof createDb>;
let proxy: Awaited<ReturnType<typeof countingProxy>>;
const clients: EvalClient[] = [];

const client = (options: Partial<EvalClientOptions> = {}) => {
  const made = new EvalClient({ baseUrl: proxy.url, apiKey: org.api_key, ...options });
  clients.push(made);
  return made;
};
const requestsFor = (subscriber: string) =>
  proxy.seen.filter((seen) => seen.path.includes(`/subscribers/${subscriber}/`));

/** An organization of 100,000 evals a month at `burstPerSecond`, with the catalog below: its API and itself. */
async function organization(name: string, burstPerSecond = 100_000) {
  const made = await createTestOrganization(db, name);
  await saveArrangement(db, made.organization_id, {
    plan: 'free',
    evalLimit: 100_000,
    blocking: true,
    burstPerSecond,
  });
  return { org: made, api: await catalog(made) };
}

async function catalog(organization: TestOrganization) {
  const api = catalogClient(httpClient(gatewayUrl), organization.headers);
  await api.feature('sso', 'flag');
  await api.feature('seats', 'limit');
  await api.plan('pro', [
    { feature: 'sso', kind: 'flag' },
    { feature: 'seats', kind: 'limit', limit: 25 },
  ]);
  return api;
}

beforeAll(async () => {
  database = await createTestDatabase();
  let redisPort: number;
  ({ server: redisServer, port: redisPort } = await startOwnRedis());
  let adminUrl: string;
  ({ env, adminUrl } = await serviceEnv({ database, redisPort, prefix: testRedisPrefix() }));
  processes.push(startNode('admin/src/server.ts', env));
  await healthy(adminUrl);
  processes.push(startNode('admin/src/worker.ts', env));
  const started = await startGateways(env, 1);
  gateway = started.gateways[0]!;
  gatewayUrl = started.urls[0]!;
  proxy = await countingProxy(gatewayUrl);

  db = createDb(database.appUrl, { max: 2 });
  let api;
  ({ org, api } = await organization('SDK org'));
  // cust_42 is the README walk-through's subscriber, which the README's SDK example asks about.
  for (const id of ['ann', 'bob', 'cat', 'dan', 'eve', 'cust_42']) {
    await api.subscriber(id);
    await api.subscribe(id, 'pro');
  }

  let burstApi;
  ({ org: burstOrg, api: burstApi } = await organization('SDK burst org', 1));
  for (const id of ['b1', 'b2', 'b3']) await burstApi.subscriber(id);
}, 120_000);

afterAll(async () => {
  await Promise.all(clients.map((made) => made.close()));
  await proxy?.close();
  await Promise.all([gateway, ...processes].filter(Boolean).map((p) => p.stop()));
  await redisServer?.stop();
  await db?.destroy();
  await database?.drop();
}, 60_000);

describe('EvalClient against real processes', () => {
  it('answers check and list with the service values and the usage headers', async () => {
    const sdk = client();
    const sso = await sdk.check('ann', 'sso');
    expect(sso).toMatchObject({
      feature: 'sso',
      kind: 'flag',
      allowed: true,
      source: 'plan',
      fallback: false,
      stale: false,
    });
    expect(sso.usage).toMatchObject({ limit: 100_000 });
    expect(sso.usage!.used).toBeGreaterThanOrEqual(0);
    expect(await sdk.check('ann', 'seats')).toMatchObject({
      kind: 'limit',
      limit: 25,
      allowed: true,
      fallback: false,
    });
    const list = await sdk.list('ann');
    // The API's own field names: the list route answers subscriber_id.
    expect(Object.keys(list).sort()).toEqual(['entitlements', 'stale', 'subscriber_id', 'usage']);
    expect(list.subscriber_id).toBe('ann');
    expect(list.entitlements.map((entry) => entry.feature)).toEqual(['seats', 'sso']);
    expect(sdk.lastUsage).toMatchObject({ limit: 100_000 });
  });

  it('answers a second check within the TTL without an HTTP request', async () => {
    const sdk = client({ cacheTtlMs: 60_000 });
    await sdk.check('bob', 'sso');
    await sdk.check('bob', 'seats');
    await sdk.list('bob');
    expect(requestsFor('bob')).toHaveLength(1);
  });

  it('revalidates an expired entry with If-None-Match and keeps the answer on 304', async () => {
    const sdk = client({ cacheTtlMs: 0 });
    const first = await sdk.check('cat', 'seats');
    const second = await sdk.check('cat', 'seats');
    const seen = requestsFor('cat');
    expect(seen).toHaveLength(2);
    expect(seen[0]).toMatchObject({ ifNoneMatch: null, status: 200 });
    expect(seen[1]!.ifNoneMatch).toMatch(/^"/);
    expect(seen[1]!.status).toBe(304);
    expect(second).toMatchObject({ limit: 25, fallback: false, stale: false });
    expect(second.limit).toBe(first.limit);
  });

  it('throws errors typed by code: unknown subscriber, unknown feature, bad key', async () => {
    const sdk = client();
    const unknown = await sdk.check('nobody', 'sso').catch((error: unknown) => error);
    expect(unknown).toBeInstanceOf(EntitlementsError);
    expect(unknown).toMatchObject({ code: 'NOT_FOUND', status: 404 });
    expect((unknown as EntitlementsError).requestId).toBeTruthy();
    await expect(sdk.check('ann', 'no-such-feature')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const badKey = client({ apiKey: 'svc-mk-1-not-a-key' });
    await expect(badKey.list('ann')).rejects.toMatchObject({ code: 'UNAUTHENTICATED', status: 401 });
  });

  it('asks again about a feature its cached document lacks, once, before calling it unknown', async () => {
    // An organization of its own: the feature made here would change the others' documents.
    const { org: own, api } = await organization('SDK new-feature org');
    await api.subscriber('fay');
    await api.subscribe('fay', 'pro');
    const sdk = client({ apiKey: own.api_key, cacheTtlMs: 60_000 });
    await sdk.check('fay', 'sso');
    // Made after fay's document was cached: the cache alone would call it unknown for a minute.
    await api.feature('beta', 'flag');
    expect(await sdk.check('fay', 'beta')).toMatchObject({ feature: 'beta', allowed: false, source: 'none' });
    expect(requestsFor('fay').map((seen) => seen.status)).toEqual([200, 200]);
    // A key that is in no document: one conditional request (304, not an eval), then the error; asked again, the
    // error at once, until the document changes.
    await expect(sdk.check('fay', 'no-such-feature')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(requestsFor('fay').map((seen) => seen.status)).toEqual([200, 200, 304]);
    for (let i = 0; i < 5; i++)
      await expect(sdk.check('fay', 'no-such-feature')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(requestsFor('fay')).toHaveLength(3);
  });

  it('retries a 429 after its Retry-After, with jittered backoff, and then answers', async () => {
    // The tiny burst reaches Redis through the worker's outbox relay: wait until it refuses.
    const raw = httpClient(gatewayUrl);
    await waitFor(async () => {
      const answers = await Promise.all(
        [1, 2, 3].map(() =>
          raw({ method: 'GET', url: '/org/subscribers/b1/entitlements', headers: burstOrg.headers }),
        ),
      );
      return answers.some((answer) => answer.statusCode === 429);
    }, 'the burst limit of 1/s');
    await new Promise((resolve) => setTimeout(resolve, 1100));

    const sdk = client({
      apiKey: burstOrg.api_key,
      retry: { retries: 5, baseDelayMs: 20, maxRetryAfterMs: 5000 },
    });
    const before = proxy.seen.length;
    const answers = await Promise.all(['b1', 'b2', 'b3'].map((id) => sdk.check(id, 'sso')));
    expect(answers.every((answer) => answer.fallback === false && answer.allowed === false)).toBe(true);
    const seen = proxy.seen.slice(before);
    const refused = seen.filter((entry) => entry.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    for (const entry of refused) {
      expect(entry.retryAfter).toMatch(/^\d+$/);
      const next = seen.find((later) => later.path === entry.path && later.at > entry.at);
      expect(next, `a retry of ${entry.path}`).toBeDefined();
      expect(next!.at - entry.at).toBeGreaterThanOrEqual(Number(entry.retryAfter) * 1000 - 50);
    }
  }, 60_000);

  it('gives up at once when Retry-After exceeds maxRetryAfterMs, with RATE_LIMITED', async () => {
    const sdk = client({
      apiKey: burstOrg.api_key,
      retry: { retries: 5, maxRetryAfterMs: 0 },
      defaultFailMode: 'open',
    });
    const answers = await Promise.all(['b1', 'b2', 'b3'].map((id) => sdk.check(id, 'seats')));
    const limited = answers.filter((answer) => answer.fallback);
    expect(limited.length).toBeGreaterThan(0);
    for (const answer of limited) {
      expect(answer.error?.code).toBe('RATE_LIMITED');
      expect(answer).toMatchObject({ allowed: true, limit: null });
    }
  });

  it('runs the README example as written', async () => {
    const answer = await readmeExample(proxy.url, org.api_key);
    expect(answer).toMatchObject({ sso: { allowed: true, fallback: false }, seats: { limit: 25 } });
    expect(answer!.features).toBeTruthy();
    expect(answer!.all.entitlements).toHaveLength(2);
    expect(await readmeExample(proxy.url.replace(/$/, ''), org.api_key).then((a) => a?.usage)).toMatchObject({
      limit: 100_000,
    });
  });

  it('runs the README example with `npm run sdk:example`, as the README says', async () => {
    const { stdout } = await promisify(execFile)('npm', ['run', '--silent', 'sdk:example'], {
      cwd: new URL('../..', import.meta.url).pathname,
      env: { ...process.env, BASE: gatewayUrl, KEY: org.api_key },
      timeout: 60_000,
    });
    const printed = JSON.parse(stdout);
    expect(printed).toMatchObject({
      sso: { allowed: true, fallback: false },
      seats: { limit: 25 },
      all: { subscriber_id: 'cust_42', entitlements: [{ feature: 'seats' }, { feature: 'sso' }] },
    });
  }, 90_000);

  it('falls back when the gateway is down: per-feature values, fail-closed, fail-open, stale cache', async () => {
    const warm = client({ cacheTtlMs: 0, retry: { retries: 1, baseDelayMs: 10 }, timeoutMs: 1000 });
    expect((await warm.check('dan', 'seats')).limit).toBe(25);
    await gateway.stop();
    try {
      await whileTheGatewayIsDown(warm);
    } finally {
      // Back on the same port (behind the same proxy), so no other case depends on running before this one.
      gateway = startNode('gateway/src/server.ts', { ...env, GATEWAY_PORT: new URL(gatewayUrl).port });
      await healthy(gatewayUrl);
    }
  }, 60_000);
});

/** What the SDK answers while the gateway is stopped (the case above restarts it). */
async function whileTheGatewayIsDown(warm: ReturnType<typeof client>): Promise<void> {
  const cold = client({
    retry: { retries: 1, baseDelayMs: 10 },
    timeoutMs: 1000,
    fallbacks: { seats: 5 },
    failModes: { sso: 'closed' },
    defaultFailMode: 'open',
  });
  const seats = await cold.check('eve', 'seats');
  expect(seats).toMatchObject({
    feature: 'seats',
    kind: 'limit',
    limit: 5,
    allowed: true,
    fallback: true,
    source: null,
  });
  expect(seats.error?.code).toMatch(/^(NETWORK_ERROR|SERVICE_UNAVAILABLE)$/);
  expect(await cold.check('eve', 'sso')).toMatchObject({ allowed: false, limit: 0, fallback: true });
  expect(await cold.check('eve', 'reports')).toMatchObject({ allowed: true, limit: null, fallback: true });

  const defaulted = client({ retry: { retries: 0 }, defaultFallback: false });
  expect(await defaulted.check('eve', 'sso')).toMatchObject({
    kind: 'flag',
    allowed: false,
    fallback: true,
  });

  // A document the service answered before the outage wins over any fallback, marked stale.
  expect(await warm.check('dan', 'seats')).toMatchObject({ limit: 25, stale: true, fallback: false });
  await expect(cold.list('eve')).rejects.toBeInstanceOf(EntitlementsError);
  expect(await warm.list('dan')).toMatchObject({
    stale: true,
    entitlements: [{ feature: 'seats' }, { feature: 'sso' }],
  });
}

describe('README', () => {
  it('holds the example this file runs, importing the published package', async () => {
    const { readFile } = await import('node:fs/promises');
    const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8');
    const example = (await readFile(new URL('../examples/readme.ts', import.meta.url), 'utf8'))
      .split('\n')
      .slice(2)
      .join('\n')
      .replace("from '../src/index.ts';", "from '@entitlements/sdk';")
      .trimEnd();
    expect(readme).toContain('```ts\n' + example + '\n```');
  });
});
