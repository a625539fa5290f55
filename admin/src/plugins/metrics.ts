import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { QUEUE_NAMES } from '../jobs/queues.ts';
import { outboxLag } from '../features/outbox/store.ts';
import { webhookDeliveryCounts } from '../features/webhook/store.ts';
import { servePublicPortMetrics } from '@ent/common/http/public-port-metrics';

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
 * Prometheus metrics (request durations, snapshot rebuilds, queue depth), served at `/metrics` on the operations
 * port (common/src/http/operations-app.ts), and, when PUBLIC_PORT_METRICS says so, on the public one to this
 * machine's direct peers (common/src/http/public-port-metrics.ts). One registry per app.
 */
export const metrics = fp(
  async function metrics(app: FastifyInstance) {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    const requestDuration = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Request duration by route template, method and status',
      labelNames: ['route', 'method', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    });
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
          QUEUE_NAMES.map(async (name) => {
            const counts = await app.queues[name]
              .getJobCounts('waiting', 'delayed', 'active')
              .catch(() => null);
            if (counts)
              this.set({ queue: name }, (counts.waiting ?? 0) + (counts.delayed ?? 0) + (counts.active ?? 0));
          }),
        );
      },
    });
    new Gauge({
      name: 'outbox_pending_rows',
      help: 'Outbox entries (committed changes) not yet published to Redis',
      registers: [registry],
      async collect() {
        const lag = await outboxLag(app.db).catch(() => null);
        if (lag) this.set(lag.undone);
      },
    });
    new Gauge({
      name: 'outbox_oldest_pending_age_seconds',
      help: 'Age of the oldest outbox entry not yet published to Redis (0 when none)',
      registers: [registry],
      async collect() {
        const lag = await outboxLag(app.db).catch(() => null);
        if (lag) this.set(lag.oldestAgeSeconds);
      },
    });
    new Gauge({
      name: 'webhook_deliveries_pending',
      help: 'Webhook deliveries not yet delivered, failed or canceled',
      registers: [registry],
      async collect() {
        const counts = await webhookDeliveryCounts(app.db).catch(() => null);
        if (counts) this.set(counts.pending);
      },
    });
    new Gauge({
      name: 'webhook_deliveries_failed_last_hour',
      help: 'Webhook deliveries that failed for good in the last hour',
      registers: [registry],
      async collect() {
        const counts = await webhookDeliveryCounts(app.db).catch(() => null);
        if (counts) this.set(counts.failedLastHour);
      },
    });
    app.decorate('metrics', { registry, snapshotRebuilds });
    servePublicPortMetrics(app, registry, app.config.publicPortMetrics);
    app.addHook('onResponse', async (request, reply) => {
      requestDuration.observe(
        {
          route: request.routeOptions.url ?? 'unmatched',
          method: request.method,
          status: String(reply.statusCode),
        },
        reply.elapsedTime / 1000,
      );
    });
  },
  { name: 'metrics', dependencies: ['infrastructure', 'queues'] },
);
