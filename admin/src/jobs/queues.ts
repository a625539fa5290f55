import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';
import type { Config } from '@ent/common/config';
import { redisKeys } from '@ent/common/redis/keys';

/** Every queue and the payload of its jobs. Add a queue here first; workers and producers follow the map. */
export interface QueuePayloads {
  /** Rebuild snapshots from Postgres into Redis, then tell gateways to drop what they cached. */
  snapshots:
    | { kind: 'catalog'; organizationId: string }
    | { kind: 'subscriber'; organizationId: string; subscriberId: string }
    | { kind: 'auth'; organizationId: string }
    | { kind: 'organization'; organizationId: string };
  /** Repeatable: settle audit entries left `pending` past the bound to `no_response`. */
  'audit-settle': { olderThanMs: number };
  /** One webhook delivery attempt sequence for one event. */
  'webhook-delivery': { deliveryId: string };
  /** Repeatable: expired overrides republish their subscriber's snapshot (eviction; expiry itself is exact). */
  'override-expiry': { organizationId?: string };
}

export type QueueName = keyof QueuePayloads;
export type Queues = { [Name in QueueName]: Queue<QueuePayloads[Name], unknown, Name> };

export const QUEUE_NAMES: QueueName[] = ['snapshots', 'audit-settle', 'webhook-delivery', 'override-expiry'];

/** BullMQ needs its own connection options (blocking commands); the prefix carries one hash tag for Cluster. */
export function queueConnection(config: Config): { connection: ConnectionOptions; prefix: string } {
  const url = new URL(config.redisUrl.replace('redis+cluster://', 'redis://'));
  return {
    connection: { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null },
    prefix: redisKeys(config.redisKeyPrefix).queuePrefix,
  };
}

export const defaultJobOptions: JobsOptions = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: 1000,
  removeOnFail: 5000,
};

export function createQueues(config: Config): Queues {
  const options = { ...queueConnection(config), defaultJobOptions };
  return {
    snapshots: new Queue('snapshots', options),
    'audit-settle': new Queue('audit-settle', options),
    'webhook-delivery': new Queue('webhook-delivery', options),
    'override-expiry': new Queue('override-expiry', options),
  } as Queues;
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map((queue) => queue.close()));
}
