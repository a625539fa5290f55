import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createDb } from '@ent/common/db/connect';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { freePort, startNode, startRedis, waitFor, type Started } from '../processes.ts';

/**
 * Readiness and graceful shutdown of real processes: each scenario starts its own admin, gateway and, where
 * it stops one, its own redis-server, all on free ports against one test database.
 */
let database: TestDatabase;
let db: ReturnType<typeof createDb>;
let org: TestOrganization;
const started: Started[] = [];
const prefix = testRedisPrefix();

const SHUTDOWN_TIMEOUT_MS = 10_000;
const DRAIN_DELAY_MS = 3000;

const run = (started$: Started) => {
  started.push(started$);
  return started$;
};

async function redisOn(): Promise<{ server: Started; url: string }> {
  const port = await freePort();
  const server = run(startRedis(port));
  const url = `redis://127.0.0.1:${port}`;
  const client = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
  client.on('error', () => {});
  try {
    await waitFor(async () => (await client.ping()) === 'PONG', 'redis-server');
  } finally {
    client.disconnect();
  }
  return { server, url };
}

const baseEnv = (redisUrl: string): Record<string, string> => ({
  DATABASE_URL: database.appUrl,
  DATABASE_OWNER_URL: database.ownerUrl,
  REDIS_URL: redisUrl,
  REDIS_KEY_PREFIX: prefix,
  LOG_LEVEL: 'warn',
});

/** Waits for /healthz (generously: a loaded machine starts tsx slowly); a failure shows the process's output. */
const healthyOr = (service: Started, url: string) =>
  waitFor(async () => (await fetch(`${url}/healthz`)).ok, `${url}/healthz`, 60_000).catch((error: Error) => {
    throw new Error(`${error.message}\n${service.output()}`);
  });

async function startAdmin(env: Record<string, string>): Promise<{ process: Started; url: string; opsUrl: string }> {
  const port = await freePort();
  const opsPort = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const service = run(
    startNode('admin/src/server.ts', { ...env, ADMIN_PORT: String(port), ADMIN_METRICS_PORT: String(opsPort) }),
  );
  await healthyOr(service, url);
  // The detailed readiness (which dependency is down) is on the operations port only.
  return { process: service, url, opsUrl: `http://127.0.0.1:${opsPort}` };
}

async function startGateway(
  env: Record<string, string>,
  adminUrl: string,
): Promise<{ process: Started; url: string; opsUrl: string }> {
  const port = await freePort();
  const opsPort = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const service = run(
    startNode('gateway/src/server.ts', {
      ...env,
      ADMIN_URL: adminUrl,
      GATEWAY_PORT: String(port),
      GATEWAY_METRICS_PORT: String(opsPort),
    }),
  );
  await healthyOr(service, url);
  // The detailed readiness (which dependency is down) is on the operations port only.
  return { process: service, url, opsUrl: `http://127.0.0.1:${opsPort}` };
}

const readyz = async (url: string) => {
  const res = await fetch(`${url}/readyz`);
  return { status: res.status, body: (await res.json()) as Record<string, string> };
};

const exitOf = (started$: Started) =>
  new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) => {
    if (started$.child.exitCode !== null)
      return resolve({ code: started$.child.exitCode, signal: null, at: Date.now() });
    started$.child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() }));
  });

const check = (url: string, subscriber: string) =>
  fetch(`${url}/org/subscribers/${subscriber}/entitlements/check`, {
    method: 'POST',
    headers: { 'x-api-key': org.api_key, 'content-type': 'application/json' },
    body: JSON.stringify({ feature: 'sso' }),
  });

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb(database.appUrl, { max: 2 });
  org = await createTestOrganization(db, 'Shutdown org');
  await saveArrangement(db, org.organization_id, {
    plan: 'free',
    evalLimit: 1_000_000,
    blocking: false,
    burstPerSecond: 1_000_000,
  });
}, 120_000);

afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await db?.destroy();
  await database?.drop();
}, 120_000);

describe('a gateway stopped with SIGTERM', () => {
  it('fails readiness at once, keeps serving through the drain, finishes requests in flight and exits 0 within the deadline', async () => {
    const redis = await redisOn();
    const env = {
      ...baseEnv(redis.url),
      SHUTDOWN_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
      SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    };
    const admin = await startAdmin(env);
    const gateway = await startGateway(env, admin.url);
    const write = (path: string, method: string, body: unknown) =>
      fetch(`${gateway.url}${path}`, {
        method,
        headers: { ...org.headers, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await write('/org/features', 'POST', { key: 'sso', name: 'SSO', kind: 'flag' })).status).toBe(
      201,
    );
    expect((await write('/org/subscribers', 'POST', { subscriber_id: 'ann', name: 'Ann' })).status).toBe(201);
    expect((await check(gateway.url, 'ann')).status).toBe(200);
    expect(await readyz(gateway.url)).toEqual({ status: 200, body: { status: 'ready' } });

    // A write held in flight: another session holds the subscriber row, so admin's UPDATE waits on the lock
    // (the audit entry, which only references the organization, is not held up).
    const holder = new pg.Client({ connectionString: database.ownerUrl });
    await holder.connect();
    let slowWrite: Promise<Response> | undefined;
    let exit: ReturnType<typeof exitOf> | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query(
        'SELECT 1 FROM subscribers WHERE organization_id = $1 AND subscriber_id = $2 FOR NO KEY UPDATE',
        [org.organization_id, 'ann'],
      );
      slowWrite = write('/org/subscribers/ann', 'PATCH', { name: 'Ann Again' });
      await waitFor(
        async () =>
          (
            await holder.query(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
          ).rows[0].n > 0,
        'the write waiting on the row lock',
      );
      const evals = Array.from({ length: 40 }, () => check(gateway.url, 'ann'));

      exit = exitOf(gateway.process);
      const signalledAt = Date.now();
      process.kill(gateway.process.child.pid!, 'SIGTERM');
      // Readiness fails at once while the gateway still serves: balancers stop sending, nobody is refused.
      await waitFor(
        async () => (await readyz(gateway.url)).status === 503,
        'readiness to fail',
        DRAIN_DELAY_MS,
      );
      expect(await readyz(gateway.url)).toEqual({ status: 503, body: { status: 'shutting_down' } });
      expect((await check(gateway.url, 'ann')).status).toBe(200);
      expect(Date.now() - signalledAt).toBeLessThan(DRAIN_DELAY_MS);

      expect((await Promise.all(evals)).map((res) => res.status)).toEqual(Array(40).fill(200));
      // Past the drain the listener is closed, and the process waits for the write still in flight.
      await new Promise((resolve) => setTimeout(resolve, signalledAt + DRAIN_DELAY_MS + 1000 - Date.now()));
      expect(gateway.process.child.exitCode).toBeNull();
      await holder.query('COMMIT');
      const written = await slowWrite;
      expect(written.status).toBe(200);
      expect(await written.json()).toMatchObject({ subscriber_id: 'ann', name: 'Ann Again' });

      const exited = await exit;
      expect({ code: exited.code, signal: exited.signal }).toEqual({ code: 0, signal: null });
      expect(exited.at - signalledAt).toBeGreaterThanOrEqual(DRAIN_DELAY_MS + 1000);
      expect(exited.at - signalledAt).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
      expect(gateway.process.output()).not.toMatch(/did not finish/);
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      await holder.end();
    }
  }, 120_000);

  it('exits 1 when the work in flight outlasts SHUTDOWN_TIMEOUT_MS', async () => {
    const redis = await redisOn();
    const env = { ...baseEnv(redis.url), SHUTDOWN_DRAIN_DELAY_MS: '0', SHUTDOWN_TIMEOUT_MS: '1000' };
    const admin = await startAdmin(env);
    const gateway = await startGateway(env, admin.url);
    // Admin frozen: the forwarded request can finish only after the gateway's deadline.
    process.kill(admin.process.child.pid!, 'SIGSTOP');
    try {
      const stuck = fetch(`${gateway.url}/org/features`, { headers: org.headers }).catch(
        (error: Error) => error,
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      const exit = exitOf(gateway.process);
      const signalledAt = Date.now();
      process.kill(gateway.process.child.pid!, 'SIGTERM');
      const exited = await exit;
      expect(exited.code).toBe(1);
      expect(exited.at - signalledAt).toBeGreaterThanOrEqual(1000);
      expect(exited.at - signalledAt).toBeLessThan(6000);
      expect(gateway.process.output()).toMatch(/did not finish within 1000 ms/);
      expect(await stuck).toBeInstanceOf(Error);
    } finally {
      process.kill(admin.process.child.pid!, 'SIGCONT');
    }
  }, 120_000);
});

describe('gateway readiness', () => {
  it('stays ready without admin and fails only when its Redis does', async () => {
    const redis = await redisOn();
    const env = baseEnv(redis.url);
    const admin = await startAdmin(env);
    const gateway = await startGateway(env, admin.url);
    expect(await readyz(gateway.opsUrl)).toEqual({
      status: 200,
      body: { status: 'ready', redis: 'ok', admin: 'ok' },
    });

    expect(await readyz(gateway.url)).toEqual({ status: 200, body: { status: 'ready' } });

    await admin.process.stop();
    expect(await readyz(gateway.opsUrl)).toEqual({
      status: 200,
      body: { status: 'ready', redis: 'ok', admin: 'unreachable' },
    });

    // A Redis that hangs rather than refuses: the probe still answers, within its own timeout.
    process.kill(redis.server.child.pid!, 'SIGSTOP');
    try {
      const askedAt = Date.now();
      expect(await readyz(gateway.opsUrl)).toEqual({
        status: 503,
        body: { status: 'not_ready', redis: 'unreachable', admin: 'unreachable' },
      });
      // Well above the 1 s probe timeout, far below a hang.
      expect(Date.now() - askedAt).toBeLessThan(5000);
    } finally {
      process.kill(redis.server.child.pid!, 'SIGCONT');
    }
    await waitFor(async () => (await readyz(gateway.opsUrl)).status === 200, 'readiness once Redis resumes');
  }, 120_000);
});

describe('admin readiness', () => {
  it('needs Postgres, not Redis', async () => {
    const redis = await redisOn();
    const admin = await startAdmin(baseEnv(redis.url));
    expect(await readyz(admin.url)).toEqual({ status: 200, body: { status: 'ready' } });
    expect(await readyz(admin.opsUrl)).toEqual({
      status: 200,
      body: { status: 'ready', postgres: 'ok', redis: 'ok' },
    });
    await redis.server.stop();
    expect(await readyz(admin.opsUrl)).toEqual({
      status: 200,
      body: { status: 'ready', postgres: 'ok', redis: 'unreachable' },
    });
  }, 120_000);

  it('is not ready while Postgres is unreachable', async () => {
    const redis = await redisOn();
    const closed = new URL(database.appUrl);
    closed.port = String(await freePort());
    const admin = await startAdmin({ ...baseEnv(redis.url), DATABASE_URL: closed.toString() });
    expect(await readyz(admin.url)).toEqual({ status: 503, body: { status: 'not_ready' } });
    expect(await readyz(admin.opsUrl)).toEqual({
      status: 503,
      body: { status: 'not_ready', postgres: 'unreachable', redis: 'ok' },
    });
  }, 120_000);

  it('answers 503 shutting_down during its drain and exits 0', async () => {
    const redis = await redisOn();
    const admin = await startAdmin({
      ...baseEnv(redis.url),
      SHUTDOWN_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
    });
    const exit = exitOf(admin.process);
    const signalledAt = Date.now();
    process.kill(admin.process.child.pid!, 'SIGTERM');
    await waitFor(async () => (await readyz(admin.url)).status === 503, 'readiness to fail', DRAIN_DELAY_MS);
    expect(await readyz(admin.url)).toEqual({ status: 503, body: { status: 'shutting_down' } });
    const exited = await exit;
    expect({ code: exited.code, signal: exited.signal }).toEqual({ code: 0, signal: null });
    expect(exited.at - signalledAt).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
  }, 120_000);
});
