import { Worker, type Queue } from 'bullmq';
import { jobDefinitions, type JobDependencies } from './processors.ts';
import { queueConnection } from './queues.ts';

/** Starts a BullMQ worker per job definition and schedules the repeatable ones; returns a stop function. */
export async function startWorkers(deps: JobDependencies): Promise<() => Promise<void>> {
  const shared = queueConnection(deps.config);
  const { connection, prefix } = shared;
  const workers = jobDefinitions.map(
    (definition) =>
      new Worker(definition.queue, definition.processor(deps), {
        connection,
        prefix,
        concurrency: definition.concurrency ?? 4,
      }),
  );
  for (const definition of jobDefinitions) {
    if (!definition.repeatEveryMs) continue;
    const queue = deps.queues[definition.queue as keyof typeof deps.queues] as unknown as Queue;
    await queue.upsertJobScheduler(
      `${definition.queue}-every`,
      { every: definition.repeatEveryMs },
      { name: definition.queue, data: definition.repeatPayload ?? {} },
    );
  }
  return async () => {
    await Promise.all(workers.map((worker) => worker.close()));
    await shared.close();
  };
}
