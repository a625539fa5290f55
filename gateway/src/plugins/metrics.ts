import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface GatewayMetrics {
  registry: Registry;
  cache: Counter<'cache' | 'result'>;
  redisRoundTrips: Counter<'op'>;
  redisErrors: Counter<'op'>;
  snapshotRebuilds: Counter<'kind'>;
  offlineEvals: Gauge;
}

declare module 'fastify' {
  interface FastifyInstance {
    gatewayMetrics: GatewayMetrics;
  }
}

/** Prometheus metrics at `/metrics`; one registry per app so several apps can live in one test process. */
export const metrics = fp(
  async function metrics(app: FastifyInstance) {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    const registers = [registry];
    const requestDuration = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Request duration by route template, method and status',
      labelNames: ['route', 'method', 'status'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    });
    app.decorate('gatewayMetrics', {
      registry,
      cache: new Counter({
        name: 'gateway_cache_requests_total',
        help: 'LRU lookups by cache (principal, entitlements, catalog) and result (hit, miss)',
        labelNames: ['cache', 'result'],
        registers,
      }),
      redisRoundTrips: new Counter({
        name: 'gateway_redis_round_trips_total',
        help: 'Redis round trips by operation',
        labelNames: ['op'],
        registers,
      }),
      redisErrors: new Counter({
        name: 'gateway_redis_errors_total',
        help: 'Failed Redis round trips by operation',
        labelNames: ['op'],
        registers,
      }),
      snapshotRebuilds: new Counter({
        name: 'gateway_snapshot_rebuild_requests_total',
        help: 'On-demand snapshot rebuilds asked of admin, by kind',
        labelNames: ['kind'],
        registers,
      }),
      offlineEvals: new Gauge({
        name: 'gateway_offline_evals_pending',
        help: 'Evals answered while Redis was unreachable, not yet added to Redis',
        registers,
      }),
    });
    app.addHook('onResponse', async (request, reply) => {
      requestDuration.observe(
        { route: request.routeOptions.url ?? 'unmatched', method: request.method, status: String(reply.statusCode) },
        reply.elapsedTime / 1000,
      );
    });
    app.get('/metrics', async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()));
  },
  { name: 'metrics' },
);
