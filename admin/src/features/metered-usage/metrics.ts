import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Gauge } from 'prom-client';

/**
 * Metered usage changed in Redis and not yet persisted to Postgres (the worker drains it at least every second), in
 * admin's registry (plugins/admin-metrics.ts), read when `/metrics` is scraped: steady growth means no worker keeps
 * up, or none runs.
 */
export const meteredUsageMetrics = fp(
  async function meteredUsageMetrics(app: FastifyInstance) {
    const registers = [app.metrics.registry];
    const dirtyOrganizations = () => app.redis.smembers(app.redisKeys.meteredDirtyOrganizations);
    new Gauge({
      name: 'metered_dirty_organizations',
      help: 'Organizations with metered balances changed in Redis and not yet persisted to Postgres',
      registers,
      async collect() {
        const organizations = await dirtyOrganizations().catch(() => null);
        if (organizations) this.set(organizations.length);
      },
    });
    new Gauge({
      name: 'metered_dirty_balances',
      help: 'Metered balances changed in Redis and not yet persisted to Postgres',
      registers,
      async collect() {
        const organizations = await dirtyOrganizations().catch(() => null);
        if (!organizations) return;
        const counts = await Promise.all(
          organizations.map((id) => app.redis.scard(app.redisKeys.meteredDirty(id)).catch(() => 0)),
        );
        this.set(counts.reduce((sum, count) => sum + count, 0));
      },
    });
  },
  { name: 'metered-usage-metrics', dependencies: ['infrastructure', 'admin-metrics'] },
);
