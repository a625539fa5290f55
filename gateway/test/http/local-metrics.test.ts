import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LocalCounter, LocalHistogram } from '@ent/common/http/local-metrics';

const BUCKETS = [0.001, 0.01, 0.1, 1];
const OBSERVED: [string, string, number][] = [
  ['/a', '200', 0.0005],
  ['/a', '200', 0.001],
  ['/a', '200', 0.05],
  ['/a', '500', 3],
  ['/b', '200', 0.2],
];

describe('local metrics', () => {
  it('exports a histogram exactly as prom-client would for the same observations', async () => {
    const local = new Registry();
    const reference = new Registry();
    const histogram = new LocalHistogram(
      'request_seconds',
      'Request duration',
      ['route', 'status'],
      BUCKETS,
      local,
    );
    const prom = new Histogram({
      name: 'request_seconds',
      help: 'Request duration',
      labelNames: ['route', 'status'],
      buckets: BUCKETS,
      registers: [reference],
    });
    for (const [route, status, value] of OBSERVED) {
      histogram.bind({ route, status }).observe(value);
      prom.observe({ route, status }, value);
    }
    expect(await local.metrics()).toBe(await reference.metrics());
    const withoutExemplars = (await reference.getMetricsAsJSON()).map((metric) => ({
      ...metric,
      values: metric.values.map((value) => {
        const { exemplar: _exemplar, ...rest } = value as typeof value & { exemplar?: unknown };
        return rest;
      }),
    }));
    expect(await local.getMetricsAsJSON()).toEqual(withoutExemplars);
  });

  it('binds one series per label set and starts again after a registry reset', async () => {
    const registry = new Registry();
    const histogram = new LocalHistogram('request_seconds', 'Request duration', ['route'], BUCKETS, registry);
    expect(histogram.bind({ route: '/a' })).toBe(histogram.bind({ route: '/a' }));
    histogram.bind({ route: '/a' }).observe(0.5);
    expect(await registry.metrics()).toContain('request_seconds_count{route="/a"} 1');
    registry.resetMetrics();
    expect(await registry.metrics()).not.toContain('request_seconds_count');
  });

  it('hands counted increments to prom-client when scraped, once each', async () => {
    const registry = new Registry();
    const counter = new LocalCounter('hits_total', 'Hits', ['cache'], [registry]);
    const hit = counter.bind({ cache: 'lru' });
    hit.inc();
    hit.inc();
    counter.inc({ cache: 'lru' });
    expect(await registry.metrics()).toContain('hits_total{cache="lru"} 3');
    expect(await registry.metrics()).toContain('hits_total{cache="lru"} 3');
    hit.inc();
    expect(await registry.metrics()).toContain('hits_total{cache="lru"} 4');
  });
});
