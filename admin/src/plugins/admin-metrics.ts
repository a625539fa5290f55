import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { QueueName } from '../jobs/queues.ts';

export interface AdminMetrics {
  registry: Registry;
  snapshotRebuilds: Counter<'kind'>;
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: AdminMetrics;
  }
}

/**
 * Admin's own metrics in the app's registry beside the request durations (common/src/http/metrics.ts): snapshot
 * rebuilds and queue depth here; a feature's figures beside the feature (features/outbox/metrics.ts,
 * features/webhook/metrics.ts). The gauges are read when `/metrics` is scraped.
 */
export const adminMetrics = fp(
  async function adminMetrics(app: FastifyInstance) {
    const registry = app.metricsRegistry;
    const snapshotRebuilds = new Counter({
      name: 'snapshot_rebuilds_total',
      help: 'Snapshot documents rebuilt from Postgres, by kind',
      labelNames: ['kind'],
      registers: [registry],
    });
    new Gauge({
      name: 'queue_depth',
      help: 'Jobs waiting, delayed or active, by queue',
      labelNames: ['queue'],
      registers: [registry],
      async collect() {
        await Promise.all(
          (Object.keys(app.queues) as QueueName[]).map(async (name) => {
            const counts = await app.queues[name]
              .getJobCounts('waiting', 'delayed', 'active')
              .catch(() => null);
            if (counts)
              this.set({ queue: name }, (counts.waiting ?? 0) + (counts.delayed ?? 0) + (counts.active ?? 0));
          }),
        );
      },
    });
    app.decorate('metrics', { registry, snapshotRebuilds });
  },
  { name: 'admin-metrics', dependencies: ['metrics', 'infrastructure', 'queues'] },
);
