import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';
import { Cluster } from 'ioredis';
import type { Config } from '@ent/common/config';
import { redisKeys } from '@ent/common/redis/keys';
import { nodeOptions, redisTarget } from '@ent/common/redis/redis-url';

/**
 * Every queue and the payload of its jobs: each job file adds its own (`declare module` of this file), so a new
 * job touches only its feature folder and one line of `admin/src/job-registry.ts`.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled in by declaration merging
export interface QueuePayloads {}

export type QueueName = keyof QueuePayloads;
export type Queues = { [Name in QueueName]: Queue<QueuePayloads[Name], unknown, Name> };

export interface QueueConnection {
  connection: ConnectionOptions;
  prefix: string;
  /** Ends the connection this made (a Cluster client BullMQ shares and so never closes itself). */
  close(): Promise<void>;
}

/**
 * BullMQ's own connection (blocking commands, no per-command retry limit) and its prefix, whose one hash tag
 * keeps each queue's keys on one Redis Cluster slot. It logs in as REDIS_URL says (user, password, database,
 * TLS), like every other client. On a cluster BullMQ is handed a Cluster client.
 */
export function queueConnection(config: Config): QueueConnection {
  const prefix = redisKeys(config.redisKeyPrefix).queuePrefix;
  const target = redisTarget(config);
  const login = nodeOptions(target);
  if (target.cluster) {
    const cluster = new Cluster(target.nodes, { redisOptions: { ...login, maxRetriesPerRequest: null } });
    cluster.on('error', () => {});
    return {
      connection: cluster,
      prefix,
      close: () =>
        cluster.quit().then(
          () => undefined,
          () => cluster.disconnect(),
        ),
    };
  }
  return {
    connection: { ...target.nodes[0], ...login, maxRetriesPerRequest: null },
    prefix,
    close: async () => {},
  };
}

const defaultJobOptions: JobsOptions = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: 1000,
  removeOnFail: 5000,
};

const connectionOfQueues = new WeakMap<Queues, QueueConnection>();

export function createQueues(config: Config, names: readonly QueueName[]): Queues {
  const connection = queueConnection(config);
  const options = { connection: connection.connection, prefix: connection.prefix, defaultJobOptions };
  const queues = Object.fromEntries(
    names.map((name) => [name, new Queue(name, options)]),
  ) as unknown as Queues;
  connectionOfQueues.set(queues, connection);
  return queues;
}

/** How long closing waits for a queue's connection to finish starting (Redis unreachable: it never does). */
const CLOSE_WAITS_FOR_START_MS = 2000;

/**
 * Closed only once each queue's connection has finished starting (or could not within a bound): BullMQ's own
 * start-up (its INFO version check) rejects with "Connection is closed" when a close lands in the middle of it,
 * and nothing of BullMQ's handles that rejection, so an app closed right after it was built (a test, the SDK's
 * type generator) would report an unhandled rejection.
 */
async function closeQueue(queue: Queues[QueueName]): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, CLOSE_WAITS_FOR_START_MS);
  });
  await Promise.race([
    queue.waitUntilReady().then(
      () => undefined,
      () => undefined,
    ),
    bound,
  ]);
  clearTimeout(timer);
  await queue.close();
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map(closeQueue));
  await connectionOfQueues.get(queues)?.close();
}
