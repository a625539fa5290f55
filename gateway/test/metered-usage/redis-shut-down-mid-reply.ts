import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vi, expect } from 'vitest';
import { createRedis } from '@ent/common/redis/connect';
import { withMeteringCommands, type MeteringRedis } from '../../src/metering/scripts.ts';
import { ownRedisAnswers, startOwnRedis, startRedis } from '../processes.ts';

/** A Redis of a test's own that can be shut down (SIGTERM) after a metered call ran and before its reply was sent. */
export interface RedisShutDownMidReply {
  client: MeteringRedis;
  /** The same client, whose `command` is followed in the same write by a second of DEBUG SLEEP once armed. */
  busyClient: MeteringRedis;
  /** Arms the sleep: resolves once the next `command` has been written, followed by the sleep. */
  nextCallSent(): Promise<void>;
  /** SIGTERM during that sleep; resolves once Redis has exited (disarmed). */
  shutDown(): Promise<void>;
  /** Starts Redis again on its port with its append-only file, and waits for the client to be ready. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Redis runs a client's pipelined commands in one event-loop turn and exits from the cron that follows it when a
 * SIGTERM came meanwhile, before that turn's replies are sent (decisions.md). The call is followed, in the same write,
 * by a second of DEBUG SLEEP, so the SIGTERM surely comes after the call ran (and was persisted) and before its reply.
 */
export async function redisShutDownMidReply(
  command: 'evalGateBatch' | 'usageApply',
  directoryPrefix: string,
): Promise<RedisShutDownMidReply> {
  const dir = mkdtempSync(join(tmpdir(), directoryPrefix));
  const persisted = [
    '--appendonly',
    'yes',
    '--appendfsync',
    'always',
    '--dir',
    dir,
    '--enable-debug-command',
    'local',
  ];
  const started = await startOwnRedis(persisted);
  const port = started.port;
  let server = started.server;
  const client = withMeteringCommands(
    createRedis({ redisUrl: `redis://127.0.0.1:${port}`, redisClusterNodes: [] }),
  );
  let busyAfter: (() => void) | null = null;
  const callThenSleep = (...keysAndArgs: (string | number)[]) => {
    const call = client[command](...keysAndArgs);
    if (busyAfter) {
      client.call('DEBUG', 'SLEEP', '1').catch(() => undefined);
      busyAfter();
    }
    return call;
  };
  const busyClient = new Proxy(client, {
    get(target, property) {
      if (property === command) return callThenSleep;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return {
    client,
    busyClient,
    nextCallSent: () => new Promise<void>((resolve) => (busyAfter = resolve)),
    async shutDown() {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const exited = new Promise<void>((resolve) =>
        server.child.exitCode !== null ? resolve() : server.child.once('exit', () => resolve()),
      );
      process.kill(server.child.pid!, 'SIGTERM');
      await exited;
      busyAfter = null;
    },
    async restart() {
      server = startRedis(port, persisted);
      await ownRedisAnswers(server, port);
      await vi.waitFor(() => expect(client.status).toBe('ready'), { timeout: 10_000 });
    },
    async close() {
      client.disconnect();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
