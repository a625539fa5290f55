import type { FastifyInstance, FastifyReply, FastifyRequest, onResponseHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { LocalHistogram, type HistogramSeries } from './local-metrics.ts';
import { servePublicPortMetrics, type PublicPortMetrics } from './public-port-metrics.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The app's Prometheus registry: each service adds its own metrics to it. */
    metricsRegistry: Registry;
  }
}

export interface MetricsOptions {
  /** `http_request_duration_seconds` buckets, chosen for the service's latencies. */
  requestDurationBuckets: readonly number[];
  publicPortMetrics: PublicPortMetrics;
}

/**
 * Prometheus metrics, served at `/metrics` on the operations port (operations-app.ts), and, when
 * PUBLIC_PORT_METRICS says so, on the public one to this machine's direct peers (public-port-metrics.ts): the
 * process's default metrics and every request's duration by route template, method and status. One registry per
 * app, so several apps can live in one test process. Registered before any route, so every route is measured.
 */
export const metrics = fp<MetricsOptions>(
  async function metrics(app: FastifyInstance, options) {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    const requestDuration = new LocalHistogram(
      'http_request_duration_seconds',
      'Request duration by route template, method and status',
      ['route', 'method', 'status'],
      options.requestDurationBuckets,
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
    app.decorate('metricsRegistry', registry);
    app.addHook('onRoute', (route) => {
      const observe = observerFor(route.url);
      const hook: onResponseHookHandler = (request, reply, done) => {
        observe(request, reply);
        done();
      };
      route.onResponse = [...(route.onResponse ? [route.onResponse].flat() : []), hook];
    });
    servePublicPortMetrics(app, registry, options.publicPortMetrics);
    const observeUnmatched = observerFor('unmatched');
    app.addHook('onResponse', (request, reply, done) => {
      if (request.is404) observeUnmatched(request, reply);
      done();
    });
  },
  { name: 'metrics' },
);
