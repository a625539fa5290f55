import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** One labelled series of a counter, bound once: the hot path adds to a number. */
export interface CounterSeries {
  inc(): void;
}

/**
 * A Prometheus counter counted in plain numbers and handed to prom-client when /metrics is scraped, so an
 * eval pays an addition rather than a label hash per increment.
 */
export class LocalCounter<Label extends string> {
  private readonly series = new Map<string, { labels: Record<Label, string>; value: number; reported: number }>();
  readonly counter: Counter<Label>;

  constructor(name: string, help: string, private readonly labelNames: Label[], registers: Registry[]) {
    const totals = this.series;
    this.counter = new Counter<Label>({
      name,
      help,
      labelNames,
      registers,
      collect() {
        for (const entry of totals.values()) {
          if (entry.value === entry.reported) continue;
          this.inc(entry.labels, entry.value - entry.reported);
          entry.reported = entry.value;
        }
      },
    });
  }

  bind(labels: Record<Label, string>): CounterSeries {
    const key = this.labelNames.map((name) => labels[name]).join('\u0000');
    let entry = this.series.get(key);
    if (!entry) {
      entry = { labels, value: 0, reported: 0 };
      this.series.set(key, entry);
    }
    const bound = entry;
    return { inc: () => void bound.value++ };
  }

  inc(labels: Record<Label, string>): void {
    this.bind(labels).inc();
  }
}

export interface GatewayMetrics {
  registry: Registry;
  cache: LocalCounter<'cache' | 'result'>;
  redisRoundTrips: LocalCounter<'op'>;
  redisErrors: LocalCounter<'op'>;
  snapshotRebuilds: LocalCounter<'kind'>;
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
      cache: new LocalCounter(
        'gateway_cache_requests_total',
        'LRU lookups by cache (principal, entitlements, catalog) and result (hit, miss)',
        ['cache', 'result'],
        registers,
      ),
      redisRoundTrips: new LocalCounter('gateway_redis_round_trips_total', 'Redis round trips by operation', ['op'], registers),
      redisErrors: new LocalCounter('gateway_redis_errors_total', 'Failed Redis round trips by operation', ['op'], registers),
      snapshotRebuilds: new LocalCounter(
        'gateway_snapshot_rebuild_requests_total',
        'On-demand snapshot rebuilds asked of admin, by kind',
        ['kind'],
        registers,
      ),
      offlineEvals: new Gauge({
        name: 'gateway_offline_evals_pending',
        help: 'Evals answered while Redis was unreachable, not yet added to Redis',
        registers,
      }),
    });
    app.addHook('onResponse', (request, reply, done) => {
      requestDuration.observe(
        { route: request.routeOptions.url ?? 'unmatched', method: request.method, status: String(reply.statusCode) },
        reply.elapsedTime / 1000,
      );
      done();
    });
    app.get('/metrics', async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()));
  },
  { name: 'metrics' },
);
