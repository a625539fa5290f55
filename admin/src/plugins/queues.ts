import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { closeQueues, createQueues, type Queues } from '../jobs/queues.ts';

declare module 'fastify' {
  interface FastifyInstance {
    queues: Queues;
  }
}

/** Producers for every BullMQ queue; the workers run in their own process (`npm run worker`). */
export const queues = fp(
  async function queues(app: FastifyInstance) {
    const all = createQueues(app.config);
    app.decorate('queues', all);
    app.addHook('onClose', async () => closeQueues(all));
  },
  { name: 'queues', dependencies: ['infrastructure'] },
);
