import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Gauge, type Registry } from 'prom-client';
import { LocalCounter } from '@ent/common/http/local-metrics';

export interface GatewayMetrics {
  registry: Registry;
  cache: LocalCounter<'cache' | 'result'>;
  redisRoundTrips: LocalCounter<'op'>;
  redisErrors: LocalCounter<'op'>;
  snapshotRebuilds: LocalCounter<'kind'>;
  /** Pending count settlements; the metric keeps its name so dashboards and alerts keep working. */
  offlineEvals: Gauge;
}

declare module 'fastify' {
  interface FastifyInstance {
    gatewayMetrics: GatewayMetrics;
  }
}

/**
 * The gateway's own metrics (caches, Redis round trips, snapshot rebuilds, pending settlements), in the app's
 * registry beside the request durations (common/src/http/metrics.ts).
 */
export const gatewayMetrics = fp(
  async function gatewayMetrics(app: FastifyInstance) {
    const registry = app.metricsRegistry;
    const registers = [registry];
    app.decorate('gatewayMetrics', {
      registry,
      cache: new LocalCounter(
        'gateway_cache_requests_total',
        'LRU lookups by cache (principal, entitlements, catalog) and result (hit, miss)',
        ['cache', 'result'],
        registers,
      ),
      redisRoundTrips: new LocalCounter(
        'gateway_redis_round_trips_total',
        'Redis round trips by operation',
        ['op'],
        registers,
      ),
      redisErrors: new LocalCounter(
        'gateway_redis_errors_total',
        'Failed Redis round trips by operation',
        ['op'],
        registers,
      ),
      snapshotRebuilds: new LocalCounter(
        'gateway_snapshot_rebuild_requests_total',
        'On-demand snapshot rebuilds asked of admin, by kind',
        ['kind'],
        registers,
      ),
      offlineEvals: new Gauge({
        name: 'gateway_offline_evals_pending',
        help: 'Eval count settlements (gate calls that failed while Redis was unreachable, refunds) not yet applied to Redis',
        registers,
      }),
    });
  },
  { name: 'gateway-metrics', dependencies: ['metrics'] },
);
