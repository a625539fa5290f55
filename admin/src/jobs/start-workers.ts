import { Worker, type Queue } from 'bullmq';
import { checkRedisLogin } from '@ent/common/redis/connect';
import type { AnyJobDefinition, JobDependencies } from './job.ts';
import { queueConnection } from './queues.ts';

export interface StartWorkersOptions {
  /** How often each repeatable job's scheduler is checked for and registered again if Redis lost it. */
  schedulerCheckEveryMs?: number;
}

const schedulerId = (definition: AnyJobDefinition) => `${definition.queue}-every`;

/**
 * Starts a BullMQ worker per job definition and schedules the repeatable ones; returns a stop function.
 * Rejects with RedisLoginError when Redis refuses REDIS_URL's login, so the worker stops instead of
 * retrying in silence. Schedulers live only in Redis: a Redis that restarts empty (or is flushed) loses
 * them, so they are registered again whenever a queue's connection is ready again, and checked for
 * periodically.
 */
export async function startWorkers(
  deps: JobDependencies,
  definitions: readonly AnyJobDefinition[],
  options: StartWorkersOptions = {},
): Promise<() => Promise<void>> {
  await checkRedisLogin(deps.config);
  const shared = queueConnection(deps.config);
  const { connection, prefix } = shared;
  const workers = definitions.map(
    (definition) =>
      new Worker(definition.queue, definition.processor(deps), {
        connection,
        prefix,
        concurrency: definition.concurrency ?? 4,
      }),
  );
  const queueOf = (definition: AnyJobDefinition) =>
    deps.queues[definition.queue as keyof typeof deps.queues] as unknown as Queue;
  const register = (definition: AnyJobDefinition) =>
    queueOf(definition).upsertJobScheduler(
      schedulerId(definition),
      { every: definition.repeatEveryMs },
      { name: definition.queue, data: definition.repeatPayload ?? {} },
    );
  const repeatable = definitions.filter((definition) => definition.repeatEveryMs);

  for (const definition of definitions) {
    if (definition.repeatEveryMs) await register(definition);
    // A job that no longer repeats (the old webhook replay) must not keep its schedule from an earlier version.
    else await queueOf(definition).removeJobScheduler(schedulerId(definition));
  }

  const stopListening: (() => void)[] = [];
  for (const definition of repeatable) {
    const client = await queueOf(definition).client;
    const onReady = () => void register(definition).catch(() => {});
    client.on('ready', onReady);
    stopListening.push(() => client.off('ready', onReady));
  }
  // BullMQ's commands wait while Redis is down: one check at a time, never a pile of them.
  let checking = false;
  const registerMissing = async () => {
    if (checking) return;
    checking = true;
    try {
      for (const definition of repeatable) {
        if (!(await queueOf(definition).getJobScheduler(schedulerId(definition)))) await register(definition);
      }
    } finally {
      checking = false;
    }
  };
  const check = setInterval(
    () => void registerMissing().catch(() => {}),
    options.schedulerCheckEveryMs ?? 60_000,
  );
  check.unref();

  return async () => {
    clearInterval(check);
    for (const stop of stopListening) stop();
    await Promise.all(workers.map((worker) => worker.close()));
    await shared.close();
  };
}
