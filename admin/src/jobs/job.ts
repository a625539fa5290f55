import type { Processor } from 'bullmq';
import type { Kysely } from 'kysely';
import type { Clock } from '@ent/common/clock';
import type { Config } from '@ent/common/config';
import type { Database } from '@ent/common/db/database';
import type { RedisClient } from '@ent/common/redis/connect';
import type { QueueName, QueuePayloads, Queues } from './queues.ts';

/**
 * What a job is: its queue, its processor and (for periodic work) its schedule. Each job is defined beside its
 * feature (`features/<family>/<name>.job.ts`) and listed once in `admin/src/job-registry.ts`.
 */

/** What a job processor may use; built once per worker process (or per test). */
export interface JobDependencies {
  config: Config;
  clock: Clock;
  db: Kysely<Database>;
  redis: RedisClient;
  queues: Queues;
}

export type JobProcessor<Name extends QueueName> = (deps: JobDependencies) => Processor<QueuePayloads[Name]>;

/** A queue's processor and, for maintenance queues, the schedule it repeats on. */
export interface JobDefinition<Name extends QueueName> {
  queue: Name;
  processor: JobProcessor<Name>;
  concurrency?: number;
  repeatEveryMs?: number;
  repeatPayload?: QueuePayloads[Name];
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- heterogenous list, each entry typed at definition
export type AnyJobDefinition = JobDefinition<any>;
