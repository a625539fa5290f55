/**
 * `npm run bench`: warm metered check throughput of the gateway next to a bare Fastify route returning the
 * same JSON, in the same run, on this machine. Starts admin, one gateway and the bare server on free ports
 * against a fresh database and a unique Redis key prefix; seeds 20 features, 5 plans, 100,000 subscribers
 * with overrides on 10%; then, in alternating rounds, drives the bare route, the gateway, and the gateway with
 * metering bypassed; prints the median requests/s, p50/p99, CPU time per request (server process + Redis,
 * which a noisy machine disturbs far less than throughput) and the ratios. Env: BENCH_SECONDS (default 10),
 * BENCH_ROUNDS (3), BENCH_CONNECTIONS (64), BENCH_SUBSCRIBERS (100000).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../gateway/test/processes.ts';
import autocannon from 'autocannon';
import pg from 'pg';
import { loadConfig } from '@ent/common/config';
import { createDb, withDatabase } from '@ent/common/db/connect';
import { migrateToLatest } from '@ent/common/db/migrate';
import { createOrganization } from '../../admin/src/features/organizations/bootstrap.ts';
import { FEATURES, seed } from './seed.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 64);
const subscriberCount = Number(process.env.BENCH_SUBSCRIBERS ?? 100_000);
const log = (message: string) => process.stdout.write(`[bench] ${message}\n`);

const children: ChildProcess[] = [];
const startNode = (script: string, env: Record<string, string>) => {
  const profile = process.env.BENCH_CPU_PROF && script.startsWith('gateway') ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', script], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(child);
  return child;
};
const stopAll = () => {
  for (const child of children) if (child.pid && child.exitCode === null) process.kill(child.pid, 'SIGTERM');
};

async function healthy(url: string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not come up`);
}

interface Figures {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  requests: number;
}

/** CPU seconds (user + system) a process has used so far, from /proc. */
function processCpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds the Redis server has used so far. */
function redisCpuSeconds(): number {
  const info = spawnSync('redis-cli', ['-u', loadConfig().redisUrl, 'info', 'cpu'], { encoding: 'utf8' }).stdout;
  const value = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1] ?? 0);
  return value('used_cpu_user') + value('used_cpu_sys');
}

/** Script calls (EVALSHA) the Redis server has run so far: with requests, shows how evals are batched. */
function redisScriptCalls(): number {
  const info = spawnSync('redis-cli', ['-u', loadConfig().redisUrl, 'info', 'commandstats'], { encoding: 'utf8' }).stdout;
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0);
}

interface Measured extends Figures {
  /** Server process CPU per request, microseconds. */
  serverCpuUs: number;
  redisCpuUs: number;
  /** Evals per Redis script call (0 when the target calls no script). */
  evalsPerCall: number;
}

async function measure(name: string, url: string, pid: number, apiKey: string): Promise<Measured> {
  const cpuBefore = processCpuSeconds(pid);
  const redisBefore = redisCpuSeconds();
  const callsBefore = redisScriptCalls();
  const figures = await drive(name, url, apiKey, seconds);
  const perRequest = (seconds: number) => (seconds / Math.max(1, figures.requests)) * 1e6;
  const scriptCalls = redisScriptCalls() - callsBefore;
  return {
    ...figures,
    serverCpuUs: perRequest(processCpuSeconds(pid) - cpuBefore),
    redisCpuUs: perRequest(redisCpuSeconds() - redisBefore),
    evalsPerCall: scriptCalls > 0 ? figures.requests / scriptCalls : 0,
  };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

function summarize(name: string, runs: Measured[]): Measured {
  return {
    name,
    rps: median(runs.map((r) => r.rps)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    non2xx: runs.reduce((sum, r) => sum + r.non2xx, 0),
    errors: runs.reduce((sum, r) => sum + r.errors, 0),
    requests: runs.reduce((sum, r) => sum + r.requests, 0),
    serverCpuUs: median(runs.map((r) => r.serverCpuUs)),
    redisCpuUs: median(runs.map((r) => r.redisCpuUs)),
    evalsPerCall: median(runs.map((r) => r.evalsPerCall)),
  };
}

function drive(name: string, url: string, apiKey: string, duration: number, amount?: number): Promise<Figures> {
  let n = 0;
  const features = Array.from({ length: FEATURES }, (_, i) => `feature-${String(i).padStart(2, '0')}`);
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url,
        connections,
        ...(amount ? { amount } : { duration }),
        pipelining: 1,
        requests: [
          {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
            setupRequest: (request) => {
              n = (n + 7919) % subscriberCount; // walks every subscriber, in a scattered order
              return {
                ...request,
                path: `/org/subscribers/sub-${n}/entitlements/check`,
                body: JSON.stringify({ feature: features[n % FEATURES] }),
              };
            },
          },
        ],
      },
      (error, result) => {
        if (error) return reject(error);
        resolve({
          name,
          rps: result.requests.average,
          p50: result.latency.p50,
          p99: result.latency.p99,
          non2xx: result.non2xx,
          errors: result.errors,
          requests: result.requests.total,
        });
      },
    );
  });
}

const config = loadConfig();
const databaseName = `ent_bench_${randomBytes(4).toString('hex')}`;
const ownerUrl = withDatabase(config.databaseOwnerUrl, databaseName);
const appUrl = withDatabase(config.databaseUrl, databaseName);
const prefix = `bench${randomBytes(3).toString('hex')}`;

try {
  await migrateToLatest({ ownerUrl, appUrl });
  const [adminPort, gatewayPort, barePort, unmeteredPort, gatewayMetricsPort] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    freePort(),
  ]);
  const env = {
    DATABASE_URL: appUrl,
    DATABASE_OWNER_URL: ownerUrl,
    REDIS_KEY_PREFIX: prefix,
    ADMIN_PORT: String(adminPort),
    ADMIN_URL: `http://127.0.0.1:${adminPort}`,
    GATEWAY_PORT: String(gatewayPort),
    BARE_PORT: String(barePort),
    LOG_LEVEL: 'warn',
  };
  const db = createDb(appUrl, { max: 2 });
  const org = await createOrganization(db, 'Bench');
  let started = Date.now();
  await seed(db, org.organization_id, subscriberCount);
  await db.destroy();
  log(`seeded 20 features, 5 plans, ${subscriberCount} subscribers (10% with overrides) in ${Date.now() - started} ms`);

  const entctl = (...args: string[]) => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'admin/src/cli/entctl.ts', ...args], {
      cwd: root,
      env: { ...process.env, ...env },
      encoding: 'utf8',
    });
    if (result.status !== 0) throw new Error(`entctl ${args.join(' ')}: ${result.stderr}`);
    return result.stdout.trim();
  };
  entctl('org', 'arrangement', '--org', org.organization_id, '--burst', '10000000', '--eval-limit', '1000000000', '--json');
  started = Date.now();
  log(`snapshots: ${entctl('snapshots', 'rebuild', '--org', org.organization_id)} in ${Date.now() - started} ms`);

  startNode('admin/src/server.ts', env);
  const gatewayProcess = startNode('gateway/src/server.ts', { ...env, GATEWAY_METRICS_PORT: String(gatewayMetricsPort) });
  const bareProcess = startNode('bench/src/bare-server.ts', env);
  const unmeteredProcess = startNode('bench/src/unmetered-gateway.ts', { ...env, GATEWAY_PORT: String(unmeteredPort) });
  await Promise.all([
    healthy(`http://127.0.0.1:${adminPort}/healthz`),
    healthy(`http://127.0.0.1:${gatewayPort}/healthz`),
    healthy(`http://127.0.0.1:${barePort}/healthz`),
    healthy(`http://127.0.0.1:${unmeteredPort}/healthz`),
  ]);
  await new Promise((resolve) => setTimeout(resolve, 500));

  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const bareUrl = `http://127.0.0.1:${barePort}`;
  const sample = await fetch(`${gatewayUrl}/org/subscribers/sub-10/entitlements/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': org.api_key },
    body: JSON.stringify({ feature: 'feature-10' }),
  });
  log(`sample answer: ${sample.status} ${await sample.text()} used=${sample.headers.get('x-svc-eval-used')}`);

  const unmeteredUrl = `http://127.0.0.1:${unmeteredPort}`;
  log(`warming the gateways' LRUs: one eval for each of the ${subscriberCount} subscribers`);
  started = Date.now();
  await drive('warm-up', gatewayUrl, org.api_key, 0, subscriberCount);
  await drive('warm-up unmetered', unmeteredUrl, org.api_key, 0, subscriberCount);
  log(`warmed in ${Date.now() - started} ms`);
  await drive('bare warm-up', bareUrl, org.api_key, 2);

  log(`measuring: ${connections} connections, ${rounds} alternating rounds of ${seconds} s per target`);
  const targets = [
    { name: 'bare fastify', url: bareUrl, pid: bareProcess.pid! },
    { name: 'gateway check', url: gatewayUrl, pid: gatewayProcess.pid! },
    { name: 'unmetered', url: unmeteredUrl, pid: unmeteredProcess.pid! },
  ];
  const runs = new Map<string, Measured[]>(targets.map((t) => [t.name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const target of targets) runs.get(target.name)!.push(await measure(target.name, target.url, target.pid, org.api_key));
  }
  const [bare, gateway, unmetered] = targets.map((t) => summarize(t.name, runs.get(t.name)!)) as [Measured, Measured, Measured];

  const row = (f: Measured) =>
    `${f.name.padEnd(14)} ${f.rps.toFixed(0).padStart(8)} req/s   p50 ${String(f.p50).padStart(4)} ms   p99 ${String(f.p99).padStart(4)} ms   ` +
    `cpu/req ${f.serverCpuUs.toFixed(0).padStart(4)} us + redis ${f.redisCpuUs.toFixed(0).padStart(3)} us   evals/script call ${f.evalsPerCall ? f.evalsPerCall.toFixed(1) : '-'}   non-2xx ${f.non2xx}   errors ${f.errors}`;
  process.stdout.write(`\nmedians of ${rounds} rounds:\n${row(bare)}\n${row(gateway)}\n${row(unmetered)}\n`);
  const totalCpu = (f: Measured) => f.serverCpuUs + f.redisCpuUs;
  const signedPercent = (fraction: number) => `${fraction >= 0 ? '+' : ''}${(fraction * 100).toFixed(0)}%`;
  process.stdout.write(
    `ratio gateway/bare: throughput ${(gateway.rps / bare.rps).toFixed(2)}, p99 ${(gateway.p99 / Math.max(1, bare.p99)).toFixed(2)}x, ` +
      `cpu per request ${(totalCpu(gateway) / totalCpu(bare)).toFixed(2)}x\n` +
      `metering cost (gateway vs unmetered gateway): throughput ${(gateway.rps / unmetered.rps).toFixed(2)}, ` +
      `cpu per request ${signedPercent(totalCpu(gateway) / totalCpu(unmetered) - 1)}\n`,
  );
  const metrics = await (await fetch(`http://127.0.0.1:${gatewayMetricsPort}/metrics`)).text();
  const pick = (name: string) =>
    metrics
      .split('\n')
      .filter((line) => line.startsWith(name))
      .join('; ');
  log(pick('gateway_cache_requests_total'));
  log(pick('gateway_snapshot_rebuild_requests_total') || 'gateway_snapshot_rebuild_requests_total: none');
  log(`gateway heap: ${pick('nodejs_heap_size_used_bytes')}; ${pick('nodejs_gc_duration_seconds_sum')}`);
} finally {
  stopAll();
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const client = new pg.Client({ connectionString: withDatabase(config.databaseOwnerUrl, 'postgres') });
  await client.connect();
  await client.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`).catch(() => {});
  await client.end();
  spawnSync('redis-cli', ['-u', config.redisUrl, '--scan', '--pattern', `${prefix}:*`], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter(Boolean)
    .reduce<string[][]>((batches, key) => {
      if (!batches.length || batches[batches.length - 1]!.length >= 500) batches.push([]);
      batches[batches.length - 1]!.push(key);
      return batches;
    }, [])
    .forEach((batch) => spawnSync('redis-cli', ['-u', config.redisUrl, 'DEL', ...batch]));
}
