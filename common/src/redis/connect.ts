import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Config } from '../config.ts';
import type { RedisClient } from './client.ts';
import { withScripts } from './commands.ts';
import { nodeOptions, redactRedisUrl, redisTarget } from './redis-url.ts';

export type { RedisClient } from './client.ts';

type RedisConfig = Pick<Config, 'redisUrl' | 'redisClusterNodes'>;

/**
 * A single node or a cluster (REDIS_CLUSTER_NODES, or a redis+cluster:// URL), auto-pipelined, logged in with
 * REDIS_URL's user, password, database and TLS. Throws RedisUrlError for a URL it cannot read.
 */
export function createRedis(
  config: RedisConfig & Partial<Pick<Config, 'redisCommandTimeoutMs'>>,
  overrides: RedisOptions = {},
): RedisClient {
  const target = redisTarget(config);
  const options: RedisOptions = {
    enableAutoPipelining: true,
    maxRetriesPerRequest: 1,
    connectTimeout: 5000,
    // A Redis that hangs (paused, partitioned) must turn into an error the callers handle (evals fail open
    // or answer 503, writes skip the write-through), never into requests that wait forever.
    commandTimeout: config.redisCommandTimeoutMs,
    ...nodeOptions(target),
    ...overrides,
  };
  // Every script is defined before the first command, never while auto-pipelines are in flight (commands.ts).
  if (target.cluster) {
    return withScripts(
      quietConnectionErrors(
        new Cluster(target.nodes, {
          enableAutoPipelining: options.enableAutoPipelining,
          redisOptions: options,
        }),
      ),
    );
  }
  return withScripts(quietConnectionErrors(new Redis({ ...target.nodes[0], ...options })));
}

/** Redis answered, and refused REDIS_URL's user, password or database: reconnecting cannot help. */
export class RedisLoginError extends Error {
  override name = 'RedisLoginError';
}

const LOGIN_REFUSED =
  /\b(NOAUTH|WRONGPASS|NOPERM)\b|invalid password|invalid username|DB index is out of range/i;

const isLoginRefused = (error: unknown): boolean =>
  error instanceof Error && LOGIN_REFUSED.test(error.message);

/**
 * Resolves once a node of the configured Redis accepts the login, and rejects with RedisLoginError as soon as
 * one refuses it. ioredis would otherwise retry a wrong password forever and every command would just wait;
 * while Redis is unreachable this keeps waiting, as the services do.
 */
export async function checkRedisLogin(config: RedisConfig): Promise<void> {
  const target = redisTarget(config);
  const clients = target.nodes.map(
    (node) => new Redis({ ...node, ...nodeOptions(target), lazyConnect: true, maxRetriesPerRequest: null }),
  );
  try {
    await new Promise<void>((resolve, reject) => {
      for (const client of clients) {
        client.on('error', (error: Error) => {
          if (!isLoginRefused(error)) return;
          const reason = error.message.replace(/^Ready check failed: /, '').replace(/\.$/, '');
          reject(
            new RedisLoginError(
              `Redis at ${client.options.host}:${client.options.port} refused the login of REDIS_URL ` +
                `${JSON.stringify(redactRedisUrl(config.redisUrl))}: ${reason}. ` +
                'Check the user name, password and database index in REDIS_URL.',
            ),
          );
        });
        client.once('ready', () => resolve());
        client.connect().catch(() => {});
      }
    });
  } finally {
    for (const client of clients) client.disconnect();
  }
}

/**
 * The client reconnects by itself, and a command that fails while it is down rejects on its own (the
 * callers answer 503 or fail open); without a listener ioredis would also print every connection error.
 */
function quietConnectionErrors<T extends RedisClient>(client: T): T {
  client.on('error', () => {});
  return client;
}
