import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { closeQueues, createQueues, type QueueName, type Queues } from '../jobs/queues.ts';

declare module 'fastify' {
  interface FastifyInstance {
    queues: Queues;
  }
}

/** Producers for every BullMQ queue; the workers run in their own process (`npm run worker`). */
export interface QueuesOptions {
  /** Every job's queue (admin/src/job-registry.ts). */
  names: readonly QueueName[];
}

export const queues = fp<QueuesOptions>(
  async function queues(app: FastifyInstance, { names }) {
    const all = createQueues(app.config, names);
    app.decorate('queues', all);
    app.addHook('onClose', async () => closeQueues(all));
  },
  { name: 'queues', dependencies: ['infrastructure'] },
);
