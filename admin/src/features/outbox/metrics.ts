import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Gauge } from 'prom-client';
import { outboxLag } from './store.ts';

/** The outbox's backlog in admin's registry (plugins/admin-metrics.ts), read when `/metrics` is scraped. */
export const outboxMetrics = fp(
  async function outboxMetrics(app: FastifyInstance) {
    const registers = [app.metrics.registry];
    new Gauge({
      name: 'outbox_pending_rows',
      help: 'Outbox entries (committed changes) not yet published to Redis',
      registers,
      async collect() {
        const lag = await outboxLag(app.db).catch(() => null);
        if (lag) this.set(lag.undone);
      },
    });
    new Gauge({
      name: 'outbox_oldest_pending_age_seconds',
      help: 'Age of the oldest outbox entry not yet published to Redis (0 when none)',
      registers,
      async collect() {
        const lag = await outboxLag(app.db).catch(() => null);
        if (lag) this.set(lag.oldestAgeSeconds);
      },
    });
  },
  { name: 'outbox-metrics', dependencies: ['infrastructure', 'admin-metrics'] },
);
