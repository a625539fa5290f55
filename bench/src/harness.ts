/**
 * What every `npm run bench` mode shares: a fresh database and Redis key prefix, the seeded organization,
 * child processes started (and stopped) by PID, CPU and memory readings from /proc, and cleanup.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { loadConfig } from '@ent/common/config';
import { createDb, withDatabase } from '@ent/common/db/connect';
import { migrateToLatest } from '@ent/common/db/migrate';
import { createOrganization } from '../../admin/src/features/provisioning/create-organization.ts';
import { GATEWAY_NODE_FLAGS } from '../../gateway/src/runtime-flags.ts';
import { freePort } from '../../gateway/test/processes.ts';
import { deleteKeys } from '../../test-support/redis-keys.ts';
import { drive, type LoadFigures, type LoadOptions } from './load.ts';
import { seed, type SeedShape } from './seed.ts';

export { freePort };
export const root = fileURLToPath(new URL('../..', import.meta.url));
export const log = (message: string) => process.stdout.write(`[bench] ${message}\n`);
export const envNumber = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

export interface Child {
  process: ChildProcess;
  pid: number;
}

const children: ChildProcess[] = [];
/** Stopped after the Node processes, which would otherwise lose their Redis while shutting down. */
const commands: ChildProcess[] = [];

const tsxLoader = createRequire(import.meta.url).resolve('tsx');
const GATEWAY_SCRIPT = 'gateway/src/server.ts';
const COMPILED_GATEWAY_SCRIPT = 'dist/gateway.js';

/**
 * A Node script of this repository (through tsx, or on plain node with `compiled` for a bundle of `npm run build`),
 * optionally pinned to CPUs with taskset or run under another command (`under`, e.g. valgrind), optionally run from
 * another directory (what it writes to its working directory, e.g. perf's JIT dumps, lands there).
 */
export function startNode(
  script: string,
  env: Record<string, string>,
  options: { cpus?: string; under?: string[]; nodeArgs?: string[]; cwd?: string; compiled?: boolean } = {},
): Child {
  const wrapper = options.under ?? (options.cpus ? ['taskset', '-c', options.cpus] : []);
  // The gateway is measured as it is deployed: with its V8 flags (gateway/src/runtime-flags.ts), compiled or not,
  // unless BENCH_GATEWAY_WITHOUT_FLAGS asks to see what they change.
  const isGateway = script === GATEWAY_SCRIPT || script === COMPILED_GATEWAY_SCRIPT;
  const deployedFlags = isGateway && !process.env.BENCH_GATEWAY_WITHOUT_FLAGS ? GATEWAY_NODE_FLAGS : [];
  const loader = options.compiled ? [] : ['--import', tsxLoader];
  const [command, ...args] = [
    ...wrapper,
    process.execPath,
    ...deployedFlags,
    ...(options.nodeArgs ?? []),
    ...loader,
    join(root, script),
  ];
  const child = spawn(command!, args, {
    cwd: options.cwd ?? root,
    env: { ...process.env, ...env },
    stdio: ['ignore', process.env.BENCH_CHILD_STDOUT ? 'pipe' : 'ignore', 'inherit'],
  });
  // BENCH_CHILD_STDOUT=/tmp/out keeps each child's stdout in /tmp/out.<pid> (V8's --trace-gc goes there).
  if (process.env.BENCH_CHILD_STDOUT)
    child.stdout!.pipe(createWriteStream(`${process.env.BENCH_CHILD_STDOUT}.${child.pid}`));
  children.push(child);
  return { process: child, pid: child.pid! };
}

/** Any other command (a private redis-server), stopped with the rest. */
function startCommand(command: string, args: string[]): Child {
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  commands.push(child);
  return { process: child, pid: child.pid! };
}

const portAnswers = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port }, () => {
      socket.end();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });

/** The process id of the redis-server answering on `port` (null: none answers, or not as a Redis). */
async function redisProcessIdOn(port: number): Promise<number | null> {
  const client = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  try {
    await client.connect();
    return Number(/process_id:(\d+)/.exec(await client.info('server'))?.[1] ?? NaN) || null;
  } catch {
    return null;
  } finally {
    client.disconnect();
  }
}

/**
 * A redis-server of the mode's own on a free port (no persistence), optionally under a wrapper (taskset, which execs
 * it: same pid), stopped with the other children; its URL once it accepts connections (waits up to 10 s). The server
 * that answers must be the one started here: a port taken between the free-port probe and the start would otherwise
 * hand the mode someone else's Redis, which its cleanup then flushes. Such a start is tried again on another port.
 */
export async function startPrivateRedis(wrapper: string[] = []): Promise<string> {
  for (let start = 0; start < 5; start++) {
    const port = await freePort();
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    const child = wrapper.length
      ? startCommand(wrapper[0]!, [...wrapper.slice(1), 'redis-server', ...args])
      : startCommand('redis-server', args);
    for (let attempt = 0; attempt < 100 && !(await portAnswers(port)); attempt++) {
      if (child.process.exitCode !== null) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    if ((await redisProcessIdOn(port)) === child.pid) return `redis://127.0.0.1:${port}`;
    log(`private Redis: port ${port} answered with another server; starting again on another port`);
    if (child.process.exitCode === null) child.process.kill('SIGTERM');
  }
  throw new Error('no private redis-server of its own could be started (five ports were taken meanwhile)');
}

/** Cleanups of the worlds still in use: an interrupted run (Ctrl-C) drops their databases and keys too. */
const openWorlds = new Set<() => Promise<void>>();

/** Stops the children and cleans up every world still open (for a run interrupted by a signal). */
export async function cleanUpEverything(): Promise<void> {
  for (const cleanup of [...openWorlds]) await cleanup().catch(() => {});
  await stopChildren();
}

/** Stops what this script started, by PID: SIGTERM, then SIGKILL after 10 s; Node processes first. */
export async function stopChildren(): Promise<void> {
  await stopAll(children.splice(0));
  await stopAll(commands.splice(0));
}

async function stopAll(started: ChildProcess[]): Promise<void> {
  const running = started.filter(
    (child) => child.pid && child.exitCode === null && child.signalCode === null,
  );
  await Promise.all(
    running.map(
      (child) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            if (child.exitCode === null) child.kill('SIGKILL');
            resolve();
          }, 10_000);
          child.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
}

/** Waits until `url` answers 2xx, polling every 100 ms for up to `timeoutMs` (a tsx start on a busy 2-core machine can take minutes). */
export async function healthy(url: string, timeoutMs = 180_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (
      await fetch(url).then(
        (res) => res.ok,
        () => false,
      )
    )
      return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not come up within ${timeoutMs / 1000} s`);
}

/** CPU seconds a process has used so far, in user space and in the kernel on its behalf. */
function processCpuTimes(pid: number): { user: number; system: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 };
}

/** CPU seconds a process has used so far, user and kernel together. */
export function processCpuSeconds(pid: number): number {
  const { user, system } = processCpuTimes(pid);
  return user + system;
}

/** Load figures with the CPU the server process and Redis spent on them, µs per request. */
export interface MeasuredFigures extends LoadFigures {
  serverCpuUs: number;
  /** The server's CPU split: its own code in user space, and the kernel's work for it (absent from older results). */
  serverUserUs?: number;
  serverSystemUs?: number;
  redisCpuUs: number;
  /**
   * The whole machine's busy CPU per request (every process and the kernel, from /proc/stat) and the load
   * generator's own share of it (this process): what the throughput of a saturated machine divides. Absent from
   * older results.
   */
  machineBusyUs?: number;
  loadGeneratorUs?: number;
  /**
   * Redis's time inside each command per request (INFO commandstats, e.g. `evalsha`, `spop`, `hgetall`), whoever
   * sent it: the gateway's scripts and the worker's drain alike. What redisCpuUs holds beyond their sum is the
   * server's reading, parsing and writing. Absent from older results.
   */
  redisCommandUs?: Record<string, number>;
}

/**
 * CPU seconds the whole machine has been busy so far, all cores: user, nice, system, irq and softirq of /proc/stat's
 * first line (idle and iowait are waiting; steal is time the hypervisor gave elsewhere, not work done here).
 */
function machineBusySeconds(): number {
  const ticks = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).map(Number);
  return (ticks[1]! + ticks[2]! + ticks[3]! + ticks[6]! + ticks[7]!) / 100;
}

/** Drives `load` at the server `pid` and charges its CPU, and the Redis server's, to the requests it answered. */
export async function driveMeasured(
  pid: number,
  redisUrl: string,
  load: LoadOptions,
): Promise<MeasuredFigures> {
  const cpuBefore = processCpuTimes(pid);
  const redisBefore = redisCpuSeconds(redisUrl);
  const commandsBefore = redisCommandStats(redisUrl);
  const machineBefore = machineBusySeconds();
  const ownBefore = process.cpuUsage();
  const measured = await drive(load);
  const own = process.cpuUsage(ownBefore);
  const machineAfter = machineBusySeconds();
  const cpuAfter = processCpuTimes(pid);
  const commandsAfter = redisCommandStats(redisUrl);
  const perRequest = (used: number) => (used / Math.max(1, measured.requests)) * 1e6;
  const serverUserUs = perRequest(cpuAfter.user - cpuBefore.user);
  const serverSystemUs = perRequest(cpuAfter.system - cpuBefore.system);
  return {
    ...measured,
    serverCpuUs: serverUserUs + serverSystemUs,
    serverUserUs,
    serverSystemUs,
    redisCpuUs: perRequest(redisCpuSeconds(redisUrl) - redisBefore),
    machineBusyUs: perRequest(machineAfter - machineBefore),
    loadGeneratorUs: perRequest((own.user + own.system) / 1e6),
    redisCommandUs: Object.fromEntries(
      [...commandsAfter]
        .map(([command, { usec }]) => [command, usec - (commandsBefore.get(command)?.usec ?? 0)] as const)
        .filter(([, spent]) => spent > 0)
        .map(([command, spent]) => [command, perRequest(spent / 1e6)]),
    ),
  };
}

/** CPU seconds of the Postgres backends serving one database (admin's pool keeps its connections). */
export async function backendCpuSeconds(ownerUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: ownerUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    let total = 0;
    for (const { pid } of rows) {
      try {
        const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
        total += (Number(fields[11]) + Number(fields[12])) / 100;
      } catch {
        // A backend that ended meanwhile.
      }
    }
    return total;
  } finally {
    await client.end();
  }
}

/** Resident memory of a process, bytes. */
export function residentBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) * 1024;
}

function redisInfo(redisUrl: string, section: string): string {
  return spawnSync('redis-cli', ['-u', redisUrl, 'info', section], { encoding: 'utf8' }).stdout;
}

/** CPU seconds a Redis server has used so far. */
export function redisCpuSeconds(redisUrl: string): number {
  const info = redisInfo(redisUrl, 'cpu');
  const value = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1] ?? 0);
  return value('used_cpu_user') + value('used_cpu_sys');
}

/** What a Redis server has run so far, by command name (INFO commandstats): calls, and µs spent inside them. */
function redisCommandStats(redisUrl: string): Map<string, { calls: number; usec: number }> {
  const stats = new Map<string, { calls: number; usec: number }>();
  for (const [, command, calls, usec] of redisInfo(redisUrl, 'commandstats').matchAll(
    /cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g,
  ))
    stats.set(command!, { calls: Number(calls), usec: Number(usec) });
  return stats;
}

/** Script calls (EVALSHA) a Redis server has run so far. */
export function redisScriptCalls(redisUrl: string): number {
  return redisCommandStats(redisUrl).get('evalsha')?.calls ?? 0;
}

/** One metric's value from a Prometheus text page (the sum of its series when labels are not given). */
export async function metric(metricsUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name} `) || line.startsWith(`${name}{`))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}

/**
 * Reports and batches have their own per-organization rate (DESIGN.md §5, default 1,000 events/s, 429 above it);
 * a mode that sends more raises it, as `entctl org arrangement` does for the eval burst.
 */
export function raiseUsageEventRate(world: BenchWorld, eventsPerSecond: number): void {
  world.entctl(
    'org',
    'arrangement',
    '--org',
    world.organizationId,
    '--usage-events-per-second',
    String(eventsPerSecond),
    '--json',
  );
}

export const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

export interface BenchWorld {
  config: ReturnType<typeof loadConfig>;
  redisUrl: string;
  organizationId: string;
  apiKey: string;
  /** Environment every service of this run gets (database, Redis, prefix, admin address). */
  env: Record<string, string>;
  adminUrl: string;
  entctl: (...args: string[]) => string;
  cleanup: () => Promise<void>;
}

/**
 * A fresh database (migrated), a unique Redis key prefix, and one seeded organization with a high eval
 * limit and burst (so metering is exercised but never refuses), its snapshots already in Redis.
 */
export async function createWorld(
  shape: SeedShape,
  /** redisUrl: a Redis the mode started as a child (stopped, with its keys, by cleanup); default the shared one. */
  options: { redisUrl?: string } = {},
): Promise<BenchWorld> {
  const config = loadConfig();
  const redisUrl = options.redisUrl ?? config.redisUrl;
  const databaseName = `ent_bench_${randomBytes(4).toString('hex')}`;
  const ownerUrl = withDatabase(config.databaseOwnerUrl, databaseName);
  const appUrl = withDatabase(config.databaseUrl, databaseName);
  const prefix = `bench${randomBytes(3).toString('hex')}`;

  const cleanup = async () => {
    openWorlds.delete(cleanup);
    await stopChildren();
    const client = new pg.Client({ connectionString: withDatabase(config.databaseOwnerUrl, 'postgres') });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`).catch(() => {});
    await client.end();
    // A million subscribers' keys must not stay behind on the shared Redis. A Redis of the mode's own (pinned)
    // was one of the children just stopped, and its keys went with it.
    if (options.redisUrl !== undefined) return;
    const redis = new Redis(redisUrl);
    await deleteKeys(redis, `${prefix}:*`).finally(() => redis.disconnect());
  };

  openWorlds.add(cleanup);
  try {
    await migrateToLatest({ ownerUrl, appUrl });
    const adminPort = await freePort();
    const env = {
      DATABASE_URL: appUrl,
      DATABASE_OWNER_URL: ownerUrl,
      REDIS_URL: redisUrl,
      REDIS_KEY_PREFIX: prefix,
      ADMIN_PORT: String(adminPort),
      ADMIN_URL: `http://127.0.0.1:${adminPort}`,
      LOG_LEVEL: 'warn',
      CATALOG_MAX_FEATURES: String(Math.max(1000, shape.features)),
    };
    // Bulk inserts of a million rows take longer than a request's statement timeout.
    const db = createDb(appUrl, { max: 2, statementTimeoutMillis: 600_000 });
    const org = await createOrganization(db, 'Bench');
    let started = Date.now();
    await seed(db, org.organization_id, shape);
    await db.destroy();
    // Fresh statistics (as the owner: only it may ANALYZE), or the planner still sees the tables empty and the
    // snapshot rebuild scans them once per batch.
    const owner = new pg.Client({ connectionString: ownerUrl });
    await owner.connect();
    await owner.query('ANALYZE');
    await owner.end();
    log(
      `seeded ${shape.features} features, ${shape.plans} plans, ${shape.subscribers} subscribers ` +
        `(10% with overrides) in ${Date.now() - started} ms`,
    );
    const entctl = (...args: string[]) => {
      const result = spawnSync(process.execPath, ['--import', 'tsx', 'admin/src/cli/entctl.ts', ...args], {
        cwd: root,
        env: { ...process.env, ...env },
        encoding: 'utf8',
      });
      if (result.status !== 0) throw new Error(`entctl ${args.join(' ')}: ${result.stderr}`);
      return result.stdout.trim();
    };
    entctl(
      'org',
      'arrangement',
      '--org',
      org.organization_id,
      '--burst',
      '10000000',
      '--eval-limit',
      '1000000000',
      '--json',
    );
    started = Date.now();
    log(
      `snapshots: ${entctl('snapshots', 'rebuild', '--org', org.organization_id)} in ${Date.now() - started} ms`,
    );
    return {
      config,
      redisUrl,
      organizationId: org.organization_id,
      apiKey: org.api_key,
      env,
      adminUrl: env.ADMIN_URL,
      entctl,
      cleanup,
    };
  } catch (error) {
    await cleanup();
    throw error;
  }
}
