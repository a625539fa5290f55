import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Gauge } from 'prom-client';
import { webhookDeliveryCounts } from './store.ts';

/** The webhook deliveries' backlog in admin's registry (plugins/admin-metrics.ts), read when `/metrics` is scraped. */
export const webhookMetrics = fp(
  async function webhookMetrics(app: FastifyInstance) {
    const registers = [app.metrics.registry];
    new Gauge({
      name: 'webhook_deliveries_pending',
      help: 'Webhook deliveries not yet delivered, failed or canceled',
      registers,
      async collect() {
        const counts = await webhookDeliveryCounts(app.db).catch(() => null);
        if (counts) this.set(counts.pending);
      },
    });
    new Gauge({
      name: 'webhook_deliveries_failed_last_hour',
      help: 'Webhook deliveries that failed for good in the last hour',
      registers,
      async collect() {
        const counts = await webhookDeliveryCounts(app.db).catch(() => null);
        if (counts) this.set(counts.failedLastHour);
      },
    });
  },
  { name: 'webhook-metrics', dependencies: ['infrastructure', 'admin-metrics'] },
);
