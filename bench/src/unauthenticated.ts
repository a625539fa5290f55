/**
 * `npm run bench:unauth`: random well-formed keys (new each request, valid checksum) against the gateway's
 * check route from one client address, sustained for BENCH_SECONDS (default 10) with BENCH_CONNECTIONS (64).
 * Runs twice on a fresh database: with the default failed-lookup limit (AUTH_FAILURES_PER_MINUTE=30) and with
 * it off (0), each against its own admin and gateway. Prints 401s and 429s per second, the key lookups the
 * gateway asked of admin, and Postgres transactions in the bench database during the run.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../gateway/test/processes.ts';
import autocannon from 'autocannon';
import pg from 'pg';
import { generateApiKey } from '@ent/common/auth/api-key';
import { loadConfig } from '@ent/common/config';
import { withDatabase } from '@ent/common/db/connect';
import { migrateToLatest } from '@ent/common/db/migrate';

const root = fileURLToPath(new URL('../..', import.meta.url));
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 64);
const log = (message: string) => process.stdout.write(`[bench:unauth] ${message}\n`);

const children: ChildProcess[] = [];
const startNode = (script: string, env: Record<string, string>) => {
  const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(child);
  return child;
};
/** Stops the children this script started, by their own process ids. */
async function stopChildren(): Promise<void> {
  const running = children.splice(0).filter((child) => child.pid && child.exitCode === null);
  await Promise.all(
    running.map(
      (child) =>
        new Promise<void>((resolve) => {
          child.once('exit', () => resolve());
          process.kill(child.pid!, 'SIGTERM');
          setTimeout(() => {
            if (child.exitCode === null) process.kill(child.pid!, 'SIGKILL');
            resolve();
          }, 10_000).unref();
        }),
    ),
  );
}

async function healthy(url: string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    if (await fetch(url).then((res) => res.ok, () => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not come up`);
}

const config = loadConfig();
const databaseName = `ent_bench_unauth_${randomBytes(4).toString('hex')}`;
const ownerUrl = withDatabase(config.databaseOwnerUrl, databaseName);
const appUrl = withDatabase(config.databaseUrl, databaseName);
const prefix = `benchu${randomBytes(3).toString('hex')}`;
const stats = new pg.Client({ connectionString: withDatabase(config.databaseOwnerUrl, 'postgres') });

/** Committed and rolled-back transactions in the bench database so far (the statistics lag by about 1 s). */
async function transactions(): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 1500));
  await stats.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await stats.query<{ n: string }>(
    'SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = $1',
    [databaseName],
  );
  return Number(rows[0]?.n ?? 0);
}

async function keyLookups(metricsUrl: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('gateway_snapshot_rebuild_requests_total{kind="api_key"}'));
  return Number(line?.split(' ')[1] ?? 0);
}

interface Phase {
  limit: number;
  seconds: number;
  perSecond: Record<string, number>;
  lookups: number;
  transactions: number;
  errors: number;
}

async function phase(limit: number): Promise<Phase> {
  const [adminPort, gatewayPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
  const env = {
    DATABASE_URL: appUrl,
    DATABASE_OWNER_URL: ownerUrl,
    REDIS_KEY_PREFIX: prefix,
    ADMIN_PORT: String(adminPort),
    ADMIN_URL: `http://127.0.0.1:${adminPort}`,
    GATEWAY_PORT: String(gatewayPort),
    GATEWAY_METRICS_PORT: String(metricsPort),
    AUTH_FAILURES_PER_MINUTE: String(limit),
    // The load comes from this machine, which the limit leaves alone by default; here it stands for a client.
    AUTH_FAILURES_LIMIT_LOOPBACK: 'true',
    LOG_LEVEL: 'warn',
  };
  startNode('admin/src/server.ts', env);
  startNode('gateway/src/server.ts', env);
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const metricsUrl = `http://127.0.0.1:${metricsPort}`;
  await Promise.all([healthy(`${env.ADMIN_URL}/healthz`), healthy(`${gatewayUrl}/healthz`)]);
  try {
    const lookupsBefore = await keyLookups(metricsUrl);
    const transactionsBefore = await transactions();
    const result = await autocannon({
      url: gatewayUrl,
      connections,
      duration: seconds,
      pipelining: 1,
      requests: [
        {
          method: 'POST',
          path: '/org/subscribers/sub-1/entitlements/check',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ feature: 'feature-01' }),
          setupRequest: (request) => ({ ...request, headers: { ...request.headers, 'x-api-key': generateApiKey().plaintext } }),
        },
      ],
    });
    const perSecond: Record<string, number> = {};
    for (const [status, stat] of Object.entries(result.statusCodeStats ?? {})) perSecond[status] = (stat?.count ?? 0) / seconds;
    return {
      limit,
      seconds,
      perSecond,
      lookups: (await keyLookups(metricsUrl)) - lookupsBefore,
      transactions: (await transactions()) - transactionsBefore,
      errors: result.errors,
    };
  } finally {
    await stopChildren();
  }
}

try {
  await migrateToLatest({ ownerUrl, appUrl });
  await stats.connect();
  const phases: Phase[] = [];
  for (const limit of [30, 0]) {
    const figures = await phase(limit);
    phases.push(figures);
    const rates = Object.entries(figures.perSecond)
      .map(([status, rate]) => `${status}: ${rate.toFixed(0)}/s`)
      .join(', ');
    log(
      `AUTH_FAILURES_PER_MINUTE=${limit}: ${rates} over ${seconds} s from one address; ` +
        `key lookups asked of admin ${figures.lookups}, Postgres transactions ${figures.transactions}, errors ${figures.errors}`,
    );
  }
  process.stdout.write(`${JSON.stringify({ connections, seconds, phases })}\n`);
} finally {
  await stopChildren();
  await stats.end().catch(() => {});
  const client = new pg.Client({ connectionString: withDatabase(config.databaseOwnerUrl, 'postgres') });
  await client.connect();
  await client.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`).catch(() => {});
  await client.end();
  const keys = spawnSync('redis-cli', ['-u', config.redisUrl, '--scan', '--pattern', `${prefix}:*`], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
  for (let i = 0; i < keys.length; i += 500) spawnSync('redis-cli', ['-u', config.redisUrl, 'DEL', ...keys.slice(i, i + 500)]);
}
