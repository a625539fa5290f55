import type { FastifyInstance, FastifyReply, FastifyRequest, onResponseHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { LocalCounter, LocalHistogram, type HistogramSeries } from './local-metrics.ts';
import { servePublicPortMetrics } from '@ent/common/http/public-port-metrics';

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
 * Prometheus metrics, served at `/metrics` on the operations port (common/src/http/operations-app.ts), and, when
 * PUBLIC_PORT_METRICS says so, on the public one to this machine's direct peers (public-port-metrics.ts). One
 * registry per app, so several apps can live in one test process.
 */
export const metrics = fp(
  async function metrics(app: FastifyInstance) {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    const registers = [registry];
    const requestDuration = new LocalHistogram(
      'http_request_duration_seconds',
      'Request duration by route template, method and status',
      ['route', 'method', 'status'],
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registry,
    );
    // One observer per route template, holding its series by method and status: a response costs two map
    // lookups, with no label object, hashing or route-options lookup.
    const observerFor = (route: string) => {
      const byMethod = new Map<string, Map<number, HistogramSeries>>();
      return (request: FastifyRequest, reply: FastifyReply) => {
        let byStatus = byMethod.get(request.method);
        if (!byStatus) {
          byStatus = new Map();
          byMethod.set(request.method, byStatus);
        }
        let series = byStatus.get(reply.statusCode);
        if (!series) {
          series = requestDuration.bind({ route, method: request.method, status: String(reply.statusCode) });
          byStatus.set(reply.statusCode, series);
        }
        series.observe(reply.elapsedTime / 1000);
      };
    };
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
    app.addHook('onRoute', (route) => {
      const observe = observerFor(route.url);
      const hook: onResponseHookHandler = (request, reply, done) => {
        observe(request, reply);
        done();
      };
      route.onResponse = [...(route.onResponse ? [route.onResponse].flat() : []), hook];
    });
    servePublicPortMetrics(app, registry, app.config.publicPortMetrics);
    const observeUnmatched = observerFor('unmatched');
    app.addHook('onResponse', (request, reply, done) => {
      if (request.is404) observeUnmatched(request, reply);
      done();
    });
  },
  { name: 'metrics', dependencies: ['infrastructure'] },
);
