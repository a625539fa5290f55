import { execFileSync } from 'node:child_process';
import { loadConfig, type Config } from '@ent/common/config';

/** A Redis to run the metering suite against: one server, or a throwaway 3-master cluster. */
export interface RedisSetup {
  name: string;
  start(): Promise<{ config: Pick<Config, 'redisUrl' | 'redisClusterNodes'>; stop(): Promise<void> }>;
}

const clusterScript = new URL('../scripts/redis-cluster.sh', import.meta.url).pathname;

export const singleRedis: RedisSetup = {
  name: 'a single Redis',
  async start() {
    return { config: { redisUrl: loadConfig().redisUrl, redisClusterNodes: [] }, stop: async () => {} };
  },
};

/** Starts scripts/redis-cluster.sh on free loopback ports; `stop` ends exactly those servers. */
export const redisCluster: RedisSetup = {
  name: 'a 3-master Redis Cluster',
  async start() {
    const output = execFileSync('bash', [clusterScript, 'start'], { encoding: 'utf8', timeout: 30_000 });
    const env = Object.fromEntries(
      output
        .trim()
        .split('\n')
        .map((line) => line.split('=', 2) as [string, string]),
    );
    const dir = env.REDIS_CLUSTER_DIR;
    const nodes = env.REDIS_CLUSTER_NODES;
    if (!dir || !nodes) throw new Error(`redis-cluster.sh start printed no cluster: ${output}`);
    return {
      config: { redisUrl: 'redis://127.0.0.1:6379', redisClusterNodes: nodes.split(',') },
      stop: async () => {
        execFileSync('bash', [clusterScript, 'stop', dir], { timeout: 30_000 });
      },
    };
  },
};
