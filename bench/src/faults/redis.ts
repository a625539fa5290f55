import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, start, waitFor, type Started } from '../../../gateway/test/processes.ts';
import { onCleanup, track } from './children.ts';

/**
 * The run's own redis-server on a free port, persisting every write to an append-only file in a temporary
 * directory (fsync always), so it can come back "with its data" after a stop, or "empty" once the
 * directory is wiped.
 */
export interface FaultRedis {
  port: number;
  url: string;
  start(): Promise<void>;
  /** SIGTERM: Redis finishes its append-only file and exits; clients then get connection refused. */
  stop(): Promise<void>;
  /** Forgets everything persisted, for a restart that comes back empty. */
  wipe(): void;
  pause(): void;
  resume(): void;
  running(): boolean;
}

export async function startFaultRedis(): Promise<FaultRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'ent-faults-redis-'));
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let server: Started | null = null;
  let paused = false;
  const running = () => server !== null && server.child.exitCode === null && server.child.signalCode === null;
  const args = () => [
    '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'yes',
    '--appendfsync', 'always', '--daemonize', 'no', '--loglevel', 'warning',
  ];
  const pings = async () => {
    const client = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true, connectTimeout: 1000 });
    client.on('error', () => {});
    try {
      await client.connect();
      return (await client.ping()) === 'PONG';
    } finally {
      client.disconnect();
    }
  };

  const redis: FaultRedis = {
    port,
    url,
    running,
    async start() {
      if (running()) return;
      server = start('redis-server', args(), {});
      track(server.child.pid, 'redis-server');
      paused = false;
      await waitFor(pings, `redis-server on ${port}`, 20_000);
    },
    async stop() {
      if (paused) redis.resume();
      await server?.stop();
    },
    wipe() {
      if (running()) throw new Error('wipe Redis only while it is stopped');
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir);
    },
    pause() {
      if (server?.child.pid) process.kill(server.child.pid, 'SIGSTOP');
      paused = true;
    },
    resume() {
      if (server?.child.pid && running()) process.kill(server.child.pid, 'SIGCONT');
      paused = false;
    },
  };
  onCleanup(
    async () => {
      await redis.stop();
      rmSync(dir, { recursive: true, force: true });
    },
    () => {
      if (server?.child.pid && running()) {
        process.kill(server.child.pid, 'SIGCONT');
        process.kill(server.child.pid, 'SIGKILL');
      }
      rmSync(dir, { recursive: true, force: true });
    },
  );
  await redis.start();
  return redis;
}
