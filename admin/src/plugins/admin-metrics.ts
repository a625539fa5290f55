import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge, type Registry } from 'prom-client';
import { QUEUE_NAMES } from '../jobs/queues.ts';
import { outboxLag } from '../features/outbox/store.ts';
import { webhookDeliveryCounts } from '../features/webhook/store.ts';

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
 * Admin's own metrics (snapshot rebuilds, queue depth, outbox and webhook backlogs), in the app's registry beside
 * the request durations (common/src/http/metrics.ts). The gauges are read when `/metrics` is scraped.
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
    // Metered usage changed in Redis and not yet persisted to Postgres (the worker drains it at least every second):
    // steady growth means the worker is not keeping up or not running.
    const dirtyOrganizations = () => app.redis.smembers(app.redisKeys.meteredDirtyOrganizations);
    new Gauge({
      name: 'metered_dirty_organizations',
      help: 'Organizations with metered balances changed in Redis and not yet persisted to Postgres',
      registers: [registry],
      async collect() {
        const organizations = await dirtyOrganizations().catch(() => null);
        if (organizations) this.set(organizations.length);
      },
    });
    new Gauge({
      name: 'metered_dirty_balances',
      help: 'Metered balances changed in Redis and not yet persisted to Postgres',
      registers: [registry],
      async collect() {
        const organizations = await dirtyOrganizations().catch(() => null);
        if (!organizations) return;
        const counts = await Promise.all(
          organizations.map((id) => app.redis.scard(app.redisKeys.meteredDirty(id)).catch(() => 0)),
        );
        this.set(counts.reduce((sum, count) => sum + count, 0));
      },
    });
    app.decorate('metrics', { registry, snapshotRebuilds });
  },
  { name: 'admin-metrics', dependencies: ['metrics', 'infrastructure', 'queues'] },
);
