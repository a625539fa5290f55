import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '@ent/common/db/connect';
import { migrations } from '@ent/common/db/migrations/index';
import { buildServices, root, SERVICE_ENTRY_POINTS } from '../../../scripts/build-services.ts';
import { createTestOrganization } from '../../../test-support/admin-context.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { ensureConsoleBuilt } from '../../../console/test/stack.ts';
import { catalogClient } from '../helpers.ts';
import {
  freePort,
  healthy,
  httpClient,
  serviceEnv,
  start,
  startOwnRedis,
  waitFor,
  type Started,
} from '../processes.ts';

/**
 * The production build run as a deployment runs it: plain `node --enable-source-maps` on the bundles, no TypeScript
 * loader, against a test database and a Redis of this file. Built once, into a directory of its own under dist/
 * (the bundles resolve their npm dependencies from this repository's node_modules).
 */
const outdir = (() => {
  mkdirSync(join(root, 'dist'), { recursive: true });
  return mkdtempSync(join(root, 'dist', 'build-test-'));
})();
// No loader from the test runner's environment: the compiled files must run on Node alone.
const plainNode = { NODE_OPTIONS: '' };
const compiled = (name: keyof typeof SERVICE_ENTRY_POINTS, env: Record<string, string>) =>
  start(process.execPath, ['--enable-source-maps', join(outdir, `${name}.js`)], { ...env, ...plainNode });

let database: TestDatabase;
let redis: Started;
let env: Record<string, string>;
let adminUrl: string;
let gatewayUrl: string;
const processes: Started[] = [];
let db: ReturnType<typeof createDb>;

beforeAll(async () => {
  await buildServices(outdir);
  ensureConsoleBuilt();
  database = await createTestDatabase({ migrated: false });
  const own = await startOwnRedis();
  redis = own.server;
  ({ env, adminUrl } = await serviceEnv({ database, redisPort: own.port, prefix: testRedisPrefix() }));
  gatewayUrl = `http://127.0.0.1:${await freePort()}`;
}, 120_000);

afterAll(async () => {
  await Promise.all(processes.map((started) => started.stop()));
  await redis?.stop();
  await db?.destroy();
  await database?.drop();
  rmSync(outdir, { recursive: true, force: true });
}, 60_000);

describe('the production build (npm run build)', () => {
  it('maps every bundle back to its TypeScript source', () => {
    for (const [name, source] of Object.entries(SERVICE_ENTRY_POINTS)) {
      const map = JSON.parse(readFileSync(join(outdir, `${name}.js.map`), 'utf8')) as { sources: string[] };
      expect(map.sources, name).toContain(relative(outdir, join(root, source)));
    }
  });

  it('runs on plain node: entctl migrates, then a write through gateway and admin, an eval, the worker, the console', async () => {
    // An empty database: the migrations come from the bundle.
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--enable-source-maps', join(outdir, 'entctl.js'), 'migrate'],
      { cwd: root, env: { ...process.env, ...env, ...plainNode }, timeout: 30_000 },
    );
    expect(stdout).toBe(`applied: ${Object.keys(migrations).join(', ')}\n`);
    db = createDb(database.appUrl, { max: 2 });
    const org = await createTestOrganization(db, 'Compiled build org');

    const admin = compiled('admin', env);
    const worker = compiled('worker', env);
    const gateway = compiled('gateway', { ...env, GATEWAY_PORT: new URL(gatewayUrl).port });
    processes.push(admin, worker, gateway);
    await Promise.all([healthy(adminUrl), healthy(gatewayUrl)]);
    await waitFor(async () => /running \d+ job kinds/.test(worker.output()), 'the worker to start');

    // Writes are forwarded by the gateway to admin; the check is answered by the gateway from Redis (Lua scripts).
    const api = catalogClient(httpClient(gatewayUrl), org.headers);
    await api.feature('seats', 'limit');
    await api.plan('team', [{ feature: 'seats', kind: 'limit', limit: 12 }]);
    await api.subscriber('ada');
    await api.subscribe('ada', 'team');
    const check = await httpClient(gatewayUrl)({
      method: 'POST',
      url: '/org/subscribers/ada/entitlements/check',
      headers: org.headers,
      payload: { feature: 'seats' },
    });
    expect(check.statusCode, JSON.stringify(check.json())).toBe(200);
    expect(check.json()).toMatchObject({ limit: 12, source: 'plan' });

    // Admin finds the console's build where the source expects it (console/dist), from the bundle too.
    const consolePage = await fetch(`${adminUrl}/console`);
    expect(consolePage.status).toBe(200);
    expect(await consolePage.text()).toContain('<div id="root">');
  }, 90_000);
});
