import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';

const root = fileURLToPath(new URL('../..', import.meta.url));

const portIsFree = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });

/**
 * Ports for the processes a test starts. Each Vitest worker draws from its own block below Linux's ephemeral
 * range (32768+): ports the kernel hands out for `listen(0)` could be handed to a concurrently running test
 * file too before either process binds, and then one file's requests reach the other file's admin.
 */
const PORT_BLOCK = 1500;
const FIRST_PORT = 20_000;
let nextOffset = Math.floor(Math.random() * PORT_BLOCK);

export async function freePort(): Promise<number> {
  const block = (Number(process.env.VITEST_POOL_ID ?? 0) || 0) % 8;
  for (let attempt = 0; attempt < PORT_BLOCK; attempt++) {
    const port = FIRST_PORT + block * PORT_BLOCK + (nextOffset++ % PORT_BLOCK);
    if (await portIsFree(port)) return port;
  }
  throw new Error("no free port in this worker's block");
}

export interface Started {
  child: ChildProcess;
  output: () => string;
  stop(): Promise<void>;
}

/** A child process of this test, stopped by its PID only. */
export function start(command: string, args: string[], env: Record<string, string>): Started {
  const child = spawn(command, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)));
  child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)));
  return {
    child,
    output: () => output,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const force = setTimeout(() => child.pid && process.kill(child.pid, 'SIGKILL'), 5000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        if (child.pid) process.kill(child.pid, 'SIGTERM');
      }),
  };
}

export const startNode = (script: string, env: Record<string, string>) =>
  start(process.execPath, ['--import', 'tsx', script], env);

export const startRedis = (port: number, extraArgs: string[] = []) =>
  start(
    'redis-server',
    ['--port', String(port), '--save', '', '--appendonly', 'no', '--daemonize', 'no', ...extraArgs],
    {},
  );

/**
 * Waits until the redis-server this test started is the one answering on `port`: its process id, not merely a
 * PONG, since another test file's server could hold a port ours failed to bind. Throws at once when ours exits.
 */
export async function ownRedisAnswers(server: Started, port: number, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; attempt < 400 && Date.now() < deadline; attempt++) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      throw new Error(`redis-server on port ${port} exited: ${server.output().slice(-500)}`);
    }
    const client = new Redis({
      host: '127.0.0.1',
      port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      const info = await client.info('server');
      if (new RegExp(`^process_id:${server.child.pid}\\r?$`, 'm').test(info)) return;
      if (/^process_id:/m.test(info)) throw new Error(`port ${port} is answered by another redis-server`);
    } catch (error) {
      if ((error as Error).message.includes('another redis-server')) throw error;
    } finally {
      client.disconnect();
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`redis-server on port ${port} did not answer within ${timeoutMs} ms`);
}

/** A redis-server of this test on a free port, answering; a port taken meanwhile is given up for another. */
export async function startOwnRedis(extraArgs: string[] = []): Promise<{ server: Started; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const server = startRedis(port, extraArgs);
    try {
      await ownRedisAnswers(server, port);
      return { server, port };
    } catch (error) {
      await server.stop();
      if (attempt >= 5) throw error;
    }
  }
}

/** Polls until `probe` is true; bounded in attempts and time. */
export async function waitFor(
  probe: () => Promise<boolean>,
  what: string,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; attempt < 1000 && Date.now() < deadline; attempt++) {
    if (await probe().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Up to a minute: starting node with tsx takes seconds, and far longer on a machine saturated by other work. */
export const healthy = (url: string) =>
  waitFor(async () => (await fetch(`${url}/healthz`)).ok, `${url}/healthz`, 60_000);

export interface HttpAnswer {
  statusCode: number;
  headers: Record<string, unknown>;
  json(): any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** The base URL as a client sees it, over real HTTP; the same call shape as `injector` (helpers.ts). */
export const httpClient =
  (base: string) =>
  async ({
    method,
    url,
    headers,
    payload,
  }: {
    method: string;
    url: string;
    headers?: Record<string, string>;
    payload?: unknown;
  }): Promise<HttpAnswer> => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: { ...headers, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
      body: payload === undefined ? undefined : JSON.stringify(payload),
    });
    const text = await res.text();
    return {
      statusCode: res.status,
      headers: Object.fromEntries(res.headers) as Record<string, unknown>,
      json: () => (text ? JSON.parse(text) : null),
    };
  };

/** The environment admin, worker and gateways share: one test database, one Redis, one key prefix. */
export async function serviceEnv(options: {
  database: { appUrl: string; ownerUrl: string };
  redisPort: number;
  prefix: string;
  logLevel?: string;
}): Promise<{ env: Record<string, string>; adminUrl: string }> {
  const adminPort = await freePort();
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const env = {
    DATABASE_URL: options.database.appUrl,
    DATABASE_OWNER_URL: options.database.ownerUrl,
    REDIS_URL: `redis://127.0.0.1:${options.redisPort}`,
    REDIS_KEY_PREFIX: options.prefix,
    ADMIN_PORT: String(adminPort),
    ADMIN_URL: adminUrl,
    LOG_LEVEL: options.logLevel ?? 'warn',
    // Every process-level test runs the way a deployment does: gateways present the token admin requires.
    INTERNAL_TOKEN: randomBytes(24).toString('base64url'),
    // A cheap password hash, which admin accepts only under NODE_ENV=test (test-support/admin-context.ts).
    NODE_ENV: 'test',
    PASSWORD_HASH_COST: '10',
  };
  return { env, adminUrl };
}

/** `count` gateway processes on free ports, healthy; their URLs in the same order. None is left running on failure. */
export async function startGateways(
  env: Record<string, string>,
  count: number,
): Promise<{ gateways: Started[]; urls: string[] }> {
  const gateways: Started[] = [];
  const urls: string[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const port = await freePort();
      gateways.push(startNode('gateway/src/server.ts', { ...env, GATEWAY_PORT: String(port) }));
      urls.push(`http://127.0.0.1:${port}`);
    }
    await Promise.all(urls.map(healthy));
  } catch (error) {
    await Promise.all(gateways.map((gateway) => gateway.stop()));
    throw error;
  }
  return { gateways, urls };
}
