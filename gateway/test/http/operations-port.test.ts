import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { freePort, healthy, serviceEnv, startNode, type Started } from '../processes.ts';

/**
 * Real processes, as deployed: `/metrics` and the detailed `/readyz` on the operations ports (GATEWAY_METRICS_PORT,
 * ADMIN_METRICS_PORT); the public ports answer `/readyz` with its status alone, and `/metrics` only to a direct
 * peer on this machine.
 */
let database: TestDatabase;
const started: Started[] = [];
const urls = { gateway: '', admin: '', gatewayOps: '', adminOps: '' };

beforeAll(async () => {
  database = await createTestDatabase();
  const { env, adminUrl } = await serviceEnv({
    database,
    redisPort: 6379,
    prefix: testRedisPrefix(),
    logLevel: 'error',
  });
  const [gatewayPort, gatewayOpsPort, adminOpsPort] = [await freePort(), await freePort(), await freePort()];
  // As `npm start` runs them: DESIGN.md §4's /metrics on both public ports, for this machine's own clients.
  const local = { ...env, PUBLIC_PORT_METRICS: 'loopback' };
  started.push(startNode('admin/src/server.ts', { ...local, ADMIN_METRICS_PORT: String(adminOpsPort) }));
  started.push(
    startNode('gateway/src/server.ts', {
      ...local,
      GATEWAY_PORT: String(gatewayPort),
      GATEWAY_METRICS_PORT: String(gatewayOpsPort),
    }),
  );
  urls.admin = adminUrl;
  urls.gateway = `http://127.0.0.1:${gatewayPort}`;
  urls.gatewayOps = `http://127.0.0.1:${gatewayOpsPort}`;
  urls.adminOps = `http://127.0.0.1:${adminOpsPort}`;
  await Promise.all([
    healthy(urls.admin),
    healthy(urls.gateway),
    healthy(urls.gatewayOps),
    healthy(urls.adminOps),
  ]);
}, 90_000);

afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await database?.drop();
}, 60_000);

const get = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, text: await res.text() };
};

describe('the public ports', () => {
  it('answer /readyz with the status only', async () => {
    for (const base of [urls.gateway, urls.admin]) {
      const ready = await get(`${base}/readyz`);
      expect(ready.status, base).toBe(200);
      expect(JSON.parse(ready.text), base).toEqual({ status: 'ready' });
    }
  });

  it('answer /metrics to a direct peer on this machine (DESIGN.md §4), never through a proxy', async () => {
    const gatewayMetrics = await get(`${urls.gateway}/metrics`);
    expect(gatewayMetrics.status).toBe(200);
    expect(gatewayMetrics.text).toContain('gateway_cache_requests_total');
    const adminMetrics = await get(`${urls.admin}/metrics`);
    expect(adminMetrics.status).toBe(200);
    expect(adminMetrics.text).toContain('outbox_pending_rows');
    for (const base of [urls.gateway, urls.admin]) {
      const relayed = await fetch(`${base}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
      const text = await relayed.text();
      expect(relayed.status, base).toBe(404);
      expect(text).not.toContain('http_request_duration_seconds');
      expect(JSON.parse(text).error.code).toBe('NOT_FOUND');
    }
  });
});

describe('the operations ports', () => {
  it('serve the metrics and the detailed readiness', async () => {
    expect((await get(`${urls.gateway}/readyz`)).status).toBe(200);
    expect(JSON.parse((await get(`${urls.gatewayOps}/readyz`)).text)).toEqual({
      status: 'ready',
      redis: 'ok',
      admin: 'ok',
    });
    expect(JSON.parse((await get(`${urls.adminOps}/readyz`)).text)).toEqual({
      status: 'ready',
      postgres: 'ok',
      redis: 'ok',
    });
    const gatewayMetrics = await get(`${urls.gatewayOps}/metrics`);
    expect(gatewayMetrics.status).toBe(200);
    expect(gatewayMetrics.text).toContain('gateway_cache_requests_total');
    // The public /readyz asked first is counted, under its route.
    expect(gatewayMetrics.text).toMatch(
      /^http_request_duration_seconds_count\{route="\/readyz",method="GET",status="200"\} [1-9]\d*$/m,
    );
    const adminMetrics = await get(`${urls.adminOps}/metrics`);
    expect(adminMetrics.status).toBe(200);
    expect(adminMetrics.text).toContain('queue_depth');
  });

  it('serve nothing else (no API route is reachable through them)', async () => {
    expect((await get(`${urls.gatewayOps}/org/features`)).status).toBe(404);
    expect((await get(`${urls.adminOps}/org/features`)).status).toBe(404);
  });
});
