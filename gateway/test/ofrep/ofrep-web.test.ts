import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { Browser, Page } from 'playwright-core';
import { assertChromiumInstalled, launchChromium } from '../../../test-support/chromium.ts';
import { createDb } from '@ent/common/db/connect';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import type { Flags, OfrepPage } from './fixtures/ofrep-web-page.ts';
import { catalogClient, seedProPlan } from '../helpers.ts';
import { healthy, httpClient, serviceEnv, startGateways, startNode, type Started } from '../processes.ts';

/**
 * The unmodified @openfeature/web-sdk and @openfeature/ofrep-web-provider in a real Chromium, on a page served
 * from another origin than the gateway's, so every OFREP request is a CORS request (preflight included).
 */
const BULK_PATH = '/ofrep/v1/evaluate/flags';

/** One request the page made to the gateway and the gateway's answer, headers as the browser saw them. */
interface Exchange {
  method: string;
  path: string;
  status: number;
  request: Record<string, string>;
  response: Record<string, string>;
}

interface BrowserPage {
  page: Page;
  /** The page's requests to the gateway answered so far, in order. */
  exchanges(): Promise<Exchange[]>;
  /** The page's requests to the gateway that failed, with the browser's reason. */
  failures: { method: string; path: string; error: string }[];
  console: string[];
}

let database: TestDatabase;
let admin: Started | undefined;
const gateways: Started[] = [];
let db: ReturnType<typeof createDb>;
let org: TestOrganization;
let api: ReturnType<typeof catalogClient>;
let gatewayUrl: string;
const pageServers: Server[] = [];
/** Listed in the gateway's OFREP_CORS_ORIGINS. */
let allowedOrigin: string;
/** Serves the same page, but is not listed. */
let otherOrigin: string;
let browser: Browser | undefined;

async function servePage(script: string): Promise<string> {
  const server = createServer((request, response) => {
    if (request.url === '/page.js') {
      response.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(script);
    } else if (request.url === '/') {
      response
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end('<!doctype html><script type="module" src="/page.js"></script>');
    } else {
      response.writeHead(request.url === '/favicon.ico' ? 204 : 404).end();
    }
  });
  pageServers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A page of `origin` in a browser context of its own (so no localStorage is shared with another page). */
async function openPage(origin: string): Promise<BrowserPage> {
  const context = await browser!.newContext();
  const page = await context.newPage();
  const answered: Promise<Exchange>[] = [];
  const failures: BrowserPage['failures'] = [];
  const consoleLines: string[] = [];
  page.on('response', (response) => {
    const request = response.request();
    const url = new URL(request.url());
    if (url.origin !== gatewayUrl) return;
    const exchange = (async () => ({
      method: request.method(),
      path: url.pathname,
      status: response.status(),
      request: await request.allHeaders(),
      response: await response.allHeaders(),
    }))();
    // Handled here too: a poll in flight when its context closes must not become an unhandled rejection.
    exchange.catch(() => {});
    answered.push(exchange);
  });
  page.on('requestfailed', (request) => {
    const url = new URL(request.url());
    if (url.origin === gatewayUrl)
      failures.push({
        method: request.method(),
        path: url.pathname,
        error: request.failure()?.errorText ?? '',
      });
  });
  page.on('console', (message) => consoleLines.push(message.text()));
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => 'ofrep' in globalThis);
  return { page, exchanges: () => Promise.all(answered), failures, console: consoleLines };
}

const ofrep = (page: Page) => ({
  start: (targetingKey: string, pollInterval?: number) =>
    page.evaluate((options) => (globalThis as unknown as { ofrep: OfrepPage }).ofrep.start(options), {
      baseUrl: gatewayUrl,
      apiKey: org.api_key,
      targetingKey,
      ...(pollInterval === undefined ? {} : { pollInterval }),
    }),
  read: (): Promise<Flags> =>
    page.evaluate(() => (globalThis as unknown as { ofrep: OfrepPage }).ofrep.read()),
  setTargetingKey: (targetingKey: string) =>
    page.evaluate(
      (key) => (globalThis as unknown as { ofrep: OfrepPage }).ofrep.setTargetingKey(key),
      targetingKey,
    ),
  changes: () => page.evaluate(() => (globalThis as unknown as { ofrep: OfrepPage }).ofrep.changes),
  fetchBulk: (targetingKey: string) =>
    page.evaluate(
      ({ baseUrl, apiKey, key }) =>
        (globalThis as unknown as { ofrep: OfrepPage }).ofrep.fetchBulk(baseUrl, apiKey, key),
      { baseUrl: gatewayUrl, apiKey: org.api_key, key: targetingKey },
    ),
});

const bulkPosts = (exchanges: Exchange[]) =>
  exchanges.filter((e) => e.method === 'POST' && e.path === BULK_PATH);

beforeAll(async () => {
  assertChromiumInstalled();
  const bundle = await build({
    entryPoints: [fileURLToPath(new URL('./fixtures/ofrep-web-page.ts', import.meta.url))],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    logLevel: 'silent',
  });
  const script = bundle.outputFiles[0]!.text;
  allowedOrigin = await servePage(script);
  otherOrigin = await servePage(script);

  database = await createTestDatabase();
  const { env, adminUrl } = await serviceEnv({ database, redisPort: 6379, prefix: testRedisPrefix() });
  admin = startNode('admin/src/server.ts', env);
  await healthy(adminUrl);
  const started = await startGateways(
    { ...env, OFREP_CORS_ORIGINS: `https://app.example.com, ${allowedOrigin}` },
    1,
  );
  gateways.push(...started.gateways);
  gatewayUrl = started.urls[0]!;
  db = createDb(database.appUrl, { max: 2 });
  org = await createTestOrganization(db, 'OpenFeature web org');
  api = catalogClient(httpClient(gatewayUrl), { 'x-api-key': org.api_key });
  await seedProPlan(api);
  await api.subscriber('bob');
  await api.override('bob', 'sso', { kind: 'flag', allowed: true });
  await api.subscriber('carol');
  await api.subscribe('carol', 'pro');

  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all(pageServers.map((server) => new Promise((resolve) => server.close(resolve))));
  await Promise.all([...gateways, admin].filter((p): p is Started => Boolean(p)).map((p) => p.stop()));
  await db?.destroy();
  await database?.drop();
}, 60_000);

describe('@openfeature/web-sdk with @openfeature/ofrep-web-provider in Chromium', () => {
  it('evaluates the plan, an override, limits and an unknown flag from a page of an allowed origin', async () => {
    const browserPage = await openPage(allowedOrigin);
    const flags = ofrep(browserPage.page);
    await flags.start('alice');

    const alice = await flags.read();
    expect(alice.sso).toMatchObject({
      value: true,
      reason: 'STATIC',
      variant: 'plan',
      flagMetadata: { source: 'plan', kind: 'flag' },
    });
    expect(alice.sso.errorCode).toBeUndefined();
    expect(alice.seats).toMatchObject({ value: 25, reason: 'STATIC', variant: 'plan' });
    expect(alice.storage).toMatchObject({
      value: Number.MAX_SAFE_INTEGER,
      flagMetadata: { unlimited: true, kind: 'limit', source: 'plan' },
    });
    expect(alice.nope).toMatchObject({ value: true, reason: 'ERROR', errorCode: 'FLAG_NOT_FOUND' });

    await flags.setTargetingKey('bob');
    const bob = await flags.read();
    expect(bob.sso).toMatchObject({
      value: true,
      reason: 'TARGETING_MATCH',
      variant: 'override',
      flagMetadata: { source: 'override' },
    });
    expect(bob.seats.value).toBe(0);

    // Both answers crossed origins: the browser sent the page's Origin and the key, the gateway echoed the origin.
    await expect.poll(async () => bulkPosts(await browserPage.exchanges()).length).toBe(2);
    const posts = bulkPosts(await browserPage.exchanges());
    for (const post of posts) {
      expect(post.request.origin).toBe(allowedOrigin);
      expect(post.request.authorization).toBe(`Bearer ${org.api_key}`);
      expect(post.status).toBe(200);
      expect(post.response['access-control-allow-origin']).toBe(allowedOrigin);
      expect(post.response.etag).toMatch(/^"[\w-]{27}"$/);
    }
    // A new targeting key starts without the previous subscriber's ETag.
    expect(posts.map((post) => post.request['if-none-match'])).toEqual([undefined, undefined]);
    expect(browserPage.failures).toEqual([]);
    expect(browserPage.console.filter((line) => line.includes('CORS'))).toEqual([]);
    await browserPage.page.context().close();
  });

  it('revalidates with If-None-Match (304) while polling, and picks up an override written through the gateway', async () => {
    const browserPage = await openPage(allowedOrigin);
    const flags = ofrep(browserPage.page);
    await flags.start('carol', 200);
    expect((await flags.read()).seats).toMatchObject({ value: 25, reason: 'STATIC' });

    await expect.poll(async () => bulkPosts(await browserPage.exchanges()).length).toBeGreaterThanOrEqual(1);
    const [first] = bulkPosts(await browserPage.exchanges());
    expect(first).toMatchObject({ status: 200, request: { origin: allowedOrigin } });
    const etag = first!.response.etag!;
    // The provider could read the ETag only because the gateway exposes it; it sends it back on every poll.
    const revalidated = async (tag: string) =>
      bulkPosts(await browserPage.exchanges()).filter(
        (e) => e.status === 304 && e.request['if-none-match'] === tag,
      );
    await expect
      .poll(async () => (await revalidated(etag)).length, { timeout: 10_000 })
      .toBeGreaterThanOrEqual(2);
    for (const notModified of await revalidated(etag)) {
      expect(notModified.response).toMatchObject({ etag, 'access-control-allow-origin': allowedOrigin });
    }
    expect((await flags.read()).seats).toMatchObject({ value: 25, reason: 'STATIC' });
    expect(await flags.changes()).toEqual([]);

    await api.override('carol', 'seats', { kind: 'limit', limit: 40 });
    // The next poll gets a 200 with the new answer, and the provider emits ConfigurationChanged for that flag only.
    const changedInPage = () => (globalThis as unknown as { ofrep: OfrepPage }).ofrep.changes.length > 0;
    await browserPage.page.waitForFunction(changedInPage, undefined, { timeout: 10_000 });
    expect(await flags.changes()).toEqual([['seats']]);
    expect((await flags.read()).seats).toMatchObject({
      value: 40,
      reason: 'TARGETING_MATCH',
      variant: 'override',
    });

    const changedAnswers = async () =>
      bulkPosts(await browserPage.exchanges()).filter(
        (e) => e.status === 200 && e.request['if-none-match'] === etag,
      );
    await expect.poll(async () => (await changedAnswers()).length).toBe(1);
    const changed = await changedAnswers();
    const newEtag = changed[0]!.response.etag!;
    expect(newEtag).not.toBe(etag);
    await expect
      .poll(async () => (await revalidated(newEtag)).length, { timeout: 10_000 })
      .toBeGreaterThanOrEqual(1);
    expect(browserPage.failures).toEqual([]);
    expect(browserPage.console.filter((line) => line.includes('CORS'))).toEqual([]);
    await browserPage.page.context().close();
  });

  it('gets nothing on a page of an origin not in OFREP_CORS_ORIGINS: the browser blocks it', async () => {
    // The gateway answers this very request; only the missing Access-Control-Allow-Origin stops the browser.
    const direct = await fetch(`${gatewayUrl}${BULK_PATH}`, {
      method: 'POST',
      headers: {
        origin: otherOrigin,
        authorization: `Bearer ${org.api_key}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ context: { targetingKey: 'alice' } }),
    });
    expect(direct.status).toBe(200);
    expect(direct.headers.get('access-control-allow-origin')).toBeNull();
    expect(((await direct.json()) as { flags: unknown[] }).flags).toHaveLength(3);

    const browserPage = await openPage(otherOrigin);
    const flags = ofrep(browserPage.page);
    await expect(flags.start('alice')).rejects.toThrow(/OFREPApiFetchError|The OFREP request failed/);
    expect((await flags.read()).sso).toMatchObject({ value: false, reason: 'ERROR' });
    expect(await flags.fetchBulk('alice')).toEqual({ error: 'TypeError: Failed to fetch' });

    // The preflight is refused (no Access-Control-Allow-Origin), so the POSTs fail in the browser and no answer reaches the page.
    await expect
      .poll(
        () =>
          browserPage.failures.filter(
            (f) => f.method === 'POST' && f.path === BULK_PATH && f.error === 'net::ERR_FAILED',
          ).length,
      )
      .toBe(2);
    await expect
      .poll(
        () =>
          browserPage.console.filter(
            (line) =>
              line.includes(`from origin '${otherOrigin}' has been blocked by CORS policy`) &&
              line.includes('preflight'),
          ).length,
      )
      .toBe(2);
    expect(bulkPosts(await browserPage.exchanges())).toEqual([]);

    // The same plain fetch from the allowed origin works, so it is the origin that is refused.
    const allowedPage = await openPage(allowedOrigin);
    expect(await ofrep(allowedPage.page).fetchBulk('alice')).toEqual({ status: 200, flags: 3 });
    await Promise.all([browserPage.page.context().close(), allowedPage.page.context().close()]);
  });
});
