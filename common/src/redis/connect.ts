import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Config } from '../config.ts';

export type RedisClient = Redis | Cluster;

/** A single node or a cluster (REDIS_CLUSTER_NODES, or a redis+cluster:// URL), auto-pipelined. */
export function createRedis(
  config: Pick<Config, 'redisUrl' | 'redisClusterNodes'> & Partial<Pick<Config, 'redisCommandTimeoutMs'>>,
  overrides: RedisOptions = {},
): RedisClient {
  const options: RedisOptions = {
    enableAutoPipelining: true,
    maxRetriesPerRequest: 1,
    connectTimeout: 5000,
    // A Redis that hangs (paused, partitioned) must turn into an error the callers handle (evals fail open
    // or answer 503, writes skip the write-through), never into requests that wait forever.
    commandTimeout: config.redisCommandTimeoutMs,
    ...overrides,
  };
  const nodes = clusterNodesOf(config);
  if (nodes.length) {
    return quietConnectionErrors(
      new Cluster(nodes, { enableAutoPipelining: options.enableAutoPipelining, redisOptions: options }),
    );
  }
  return quietConnectionErrors(new Redis(config.redisUrl, options));
}

/** The cluster's seed nodes (REDIS_CLUSTER_NODES, or a redis+cluster:// URL); empty for a single Redis. */
export function clusterNodesOf(
  config: Pick<Config, 'redisUrl' | 'redisClusterNodes'>,
): { host: string; port: number }[] {
  const listed = config.redisClusterNodes.length
    ? config.redisClusterNodes
    : config.redisUrl.startsWith('redis+cluster://')
      ? config.redisUrl.replace('redis+cluster://', '').split(',')
      : [];
  return listed.map((node) => {
    const [host, port] = node.split(':');
    return { host: host || '127.0.0.1', port: Number(port || 6379) };
  });
}

/**
 * The client reconnects by itself, and a command that fails while it is down rejects on its own (the
 * callers answer 503 or fail open); without a listener ioredis would also print every connection error.
 */
function quietConnectionErrors<T extends RedisClient>(client: T): T {
  client.on('error', () => {});
  return client;
}
