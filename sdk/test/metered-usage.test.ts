import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '@ent/common/db/connect';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createTestOrganization, type TestOrganization } from '../../test-support/admin-context.ts';
import { testRedisPrefix } from '../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../test-support/databases.ts';
import {
  healthy,
  httpClient,
  serviceEnv,
  startGateways,
  startNode,
  type Started,
} from '../../gateway/test/processes.ts';
import { EvalClient, type EvalClientOptions } from '../src/index.ts';
import { countingProxy } from './counting-proxy.ts';

/**
 * Consumes and reports through the SDK against real admin, worker and gateway processes, behind a proxy that
 * records what the SDK sends and can lose an answer on its way back (the gateway applied the request, the SDK got
 * a 502): the SDK's retry with the same idempotency key must be answered, not applied twice.
 */
const LIMIT = 5;
let database: TestDatabase;
const processes: Started[] = [];
let gatewayUrl: string;
let db: ReturnType<typeof createDb>;
let org: TestOrganization;
/** Request paths whose next answer the proxy loses, once each. */
const loseNextAnswer = new Set<string>();
let proxy: Awaited<ReturnType<typeof countingProxy>>;
const clients: EvalClient[] = [];

const client = (options: Partial<EvalClientOptions> = {}) => {
  const made = new EvalClient({
    baseUrl: proxy.url,
    apiKey: org.api_key,
    retry: { retries: 2, baseDelayMs: 10 },
    ...options,
  });
  clients.push(made);
  return made;
};
const seenFor = (subscriber: string) =>
  proxy.seen.filter((seen) => seen.path.includes(`/subscribers/${subscriber}/`));

/** `GET /org/subscribers/{id}/usage` straight from the gateway: the subscriber's figures, by feature. */
async function usedOf(subscriber: string): Promise<Record<string, number>> {
  const res = await httpClient(gatewayUrl)({
    method: 'GET',
    url: `/org/subscribers/${subscriber}/usage`,
    headers: org.headers,
  });
  expect(res.statusCode).toBe(200);
  const body = res.json() as { usage: { feature: string; used: number }[] };
  return Object.fromEntries(body.usage.map((entry) => [entry.feature, entry.used]));
}

beforeAll(async () => {
  database = await createTestDatabase();
  const { env, adminUrl } = await serviceEnv({ database, redisPort: 6379, prefix: testRedisPrefix() });
  processes.push(startNode('admin/src/server.ts', env));
  await healthy(adminUrl);
  processes.push(startNode('admin/src/worker.ts', env));
  const started = await startGateways(env, 1);
  processes.push(...started.gateways);
  gatewayUrl = started.urls[0]!;
  proxy = await countingProxy(gatewayUrl, {
    loseAnswer: ({ path }) => loseNextAnswer.delete(path),
  });

  db = createDb(database.appUrl, { max: 2 });
  org = await createTestOrganization(db, 'SDK metered org');
  await saveArrangement(db, org.organization_id, {
    plan: 'free',
    evalLimit: 100_000,
    blocking: true,
    burstPerSecond: 100_000,
  });
  const call = httpClient(gatewayUrl);
  const send = async (method: string, url: string, payload: unknown) => {
    const res = await call({ method, url, headers: org.headers, payload });
    expect(res.statusCode, `${method} ${url}: ${JSON.stringify(res.json())}`).toBeLessThan(300);
  };
  await send('POST', '/org/features', { key: 'api_calls', name: 'API calls', kind: 'metered' });
  await send('POST', '/org/features', { key: 'seats', name: 'Seats', kind: 'metered' });
  await send('POST', '/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });
  await send('POST', '/org/plans', {
    key: 'team',
    name: 'Team',
    kind: 'catalog',
    grants: [
      { feature: 'api_calls', kind: 'metered', limit: LIMIT },
      { feature: 'seats', kind: 'metered', limit: 10, reset: 'never' },
      { feature: 'sso', kind: 'flag' },
    ],
  });
  for (const id of ['con', 'lost', 'cache', 'rep', 'batch', 'many']) {
    await send('POST', '/org/subscribers', { subscriber_id: id, name: id });
    await send('POST', `/org/subscribers/${id}/subscriptions`, { plan_id: 'team' });
  }
}, 120_000);

afterAll(async () => {
  await Promise.all(clients.map((made) => made.close()));
  await proxy?.close();
  await Promise.all(processes.map((started) => started.stop()));
  await db?.destroy();
  await database?.drop();
}, 60_000);

describe('consume through the SDK, against real processes', () => {
  it('allows exactly the limit of concurrent consumes, each with a key of its own', async () => {
    const sdk = client();
    const answers = await Promise.all(
      Array.from({ length: LIMIT + 3 }, () => sdk.check('con', 'api_calls', { consume: 1 })),
    );
    expect(answers.filter((answer) => answer.allowed)).toHaveLength(LIMIT);
    expect(answers.every((answer) => answer.kind === 'metered' && !answer.fallback)).toBe(true);
    expect(
      answers.filter((answer) => !answer.allowed).every((answer) => answer.metered?.used === LIMIT),
    ).toBe(true);
    const keys = seenFor('con').map((seen) => seen.idempotencyKey);
    expect(new Set(keys).size).toBe(LIMIT + 3);
    expect(await usedOf('con')).toMatchObject({ api_calls: LIMIT });
  });

  it('deducts once when the answer was lost and the SDK retried with the same key', async () => {
    loseNextAnswer.add('/org/subscribers/lost/entitlements/check');
    const answer = await client().check('lost', 'api_calls', { consume: 2 });
    const seen = seenFor('lost');
    expect(seen.map((entry) => entry.status)).toEqual([502, 200]);
    expect(seen[1]!.idempotencyKey).toBe(seen[0]!.idempotencyKey);
    expect(answer).toMatchObject({
      allowed: true,
      replayed: true,
      metered: { used: 2, remaining: LIMIT - 2 },
    });
    expect(await usedOf('lost')).toMatchObject({ api_calls: 2 });
  });

  it('is never answered from the cache: one request per consume, the cached document untouched', async () => {
    const sdk = client({ cacheTtlMs: 60_000 });
    expect(await sdk.check('cache', 'api_calls')).toMatchObject({ kind: 'metered', metered: { used: 0 } });
    expect((await sdk.check('cache', 'api_calls', { consume: 1 })).metered).toMatchObject({ used: 1 });
    expect((await sdk.check('cache', 'api_calls', { consume: 1 })).metered).toMatchObject({ used: 2 });
    expect(await sdk.check('cache', 'sso')).toMatchObject({ allowed: true });
    expect(seenFor('cache').map((seen) => seen.method)).toEqual(['GET', 'POST', 'POST']);
  });
});

describe('report and reportMany through the SDK, against real processes', () => {
  it('reports delta and set once each, also when an answer was lost', async () => {
    const sdk = client();
    loseNextAnswer.add('/org/subscribers/rep/usage');
    const first = await sdk.report('rep', 'api_calls', { delta: 7 });
    expect(first).toMatchObject({ used: 7, remaining: 0, allowed: false, replayed: true });
    expect(await sdk.report('rep', 'seats', { set: 4 })).toMatchObject({
      used: 4,
      remaining: 6,
      replayed: false,
    });
    expect(await usedOf('rep')).toMatchObject({ api_calls: 7, seats: 4 });
  });

  it('sends a batch whose answer was lost again with the same keys: each event applied once, errors per event', async () => {
    loseNextAnswer.add('/org/usage-events');
    const answer = await client().reportMany([
      { subscriber_id: 'batch', feature: 'api_calls', delta: 1 },
      { subscriber_id: 'nobody', feature: 'api_calls', delta: 1 },
      { subscriber_id: 'batch', feature: 'seats', set: 3 },
      { subscriber_id: 'batch', feature: 'api_calls', delta: 2 },
    ]);
    const batches = proxy.seen.filter((seen) => seen.path === '/org/usage-events');
    expect(batches.map((seen) => seen.status)).toEqual([502, 200]);
    expect(answer.results).toHaveLength(4);
    expect(answer.results[0]).toMatchObject({ feature: 'api_calls', used: 1 });
    expect(answer.results[1]).toMatchObject({ error: { code: 'NOT_FOUND' } });
    expect(answer.results[2]).toMatchObject({ feature: 'seats', used: 3 });
    expect(answer.results[3]).toMatchObject({ feature: 'api_calls', used: 3 });
    expect(await usedOf('batch')).toMatchObject({ api_calls: 3, seats: 3 });
  });

  it('answers a later batch refused whole per event, keeping what the earlier batches applied', async () => {
    const sdk = client();
    // The first batch (1,000 events) is taken; the second holds one event no batch may carry (422 for the body).
    const events = [
      ...Array.from({ length: 1000 }, () => ({ subscriber_id: 'many', feature: 'seats', delta: 1 })),
      { subscriber_id: 'many', feature: 'seats', delta: 1.5 },
    ];
    const answer = await sdk.reportMany(events);
    expect(answer.results).toHaveLength(1001);
    expect(answer.results[999], JSON.stringify(answer.results[999])).toMatchObject({
      feature: 'seats',
      used: 1000,
    });
    // Named by its place in the whole list, not in its batch.
    expect(answer.results[1000]).toMatchObject({
      error: { code: 'VALIDATION_ERROR', details: { field: 'events.1000.delta' } },
    });
    expect(answer.events[1000]!.idempotency_key).toMatch(/^[0-9a-f-]{36}$/);
    expect(await usedOf('many')).toMatchObject({ seats: 1000 });
    // The same mistake in the first batch: nothing was applied, and it is thrown.
    await expect(sdk.reportMany(events.slice(1000))).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
  });
});
