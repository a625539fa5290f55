import { Counter, type Registry } from 'prom-client';

/** One labelled series of a counter, bound once: the hot path adds to a number. */
export interface CounterSeries {
  inc(): void;
}

const seriesKey = (labelNames: readonly string[], labels: Record<string, string>) =>
  labelNames.map((name) => labels[name]).join('\u0000');

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
    const key = seriesKey(this.labelNames, labels);
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

/** One labelled series of a histogram, bound once: an observation is a bucket search and three additions. */
export class HistogramSeries {
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(readonly labels: Record<string, string>, private readonly upperBounds: readonly number[]) {
    this.counts = upperBounds.map(() => 0);
  }

  observe(value: number): void {
    const bounds = this.upperBounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        this.counts[i]! += 1;
        break;
      }
    }
    this.sum += value;
    this.count += 1;
  }
}

interface ExportedValue {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

/**
 * A Prometheus histogram kept in plain numbers and exported in prom-client's text format through the
 * registry (which reads any metric exposing `get()`): prom-client's own histogram validates and hashes the
 * labels on every observation, a measurable share of a warm eval.
 */
export class LocalHistogram<Label extends string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<string, HistogramSeries>();
  private readonly upperBounds: readonly number[];

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly Label[],
    buckets: readonly number[],
    registry: Registry,
  ) {
    this.upperBounds = [...buckets].sort((a, b) => a - b);
    registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  bind(labels: Record<Label, string>): HistogramSeries {
    const key = seriesKey(this.labelNames, labels);
    let series = this.series.get(key);
    if (!series) {
      series = new HistogramSeries(labels, this.upperBounds);
      this.series.set(key, series);
    }
    return series;
  }

  get(): { name: string; help: string; type: string; aggregator: string; values: ExportedValue[] } {
    const values: ExportedValue[] = [];
    for (const series of this.series.values()) {
      let cumulative = 0;
      this.upperBounds.forEach((bound, i) => {
        cumulative += series.counts[i]!;
        values.push({ metricName: `${this.name}_bucket`, labels: { le: bound, ...series.labels }, value: cumulative });
      });
      values.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf', ...series.labels }, value: series.count });
      values.push({ metricName: `${this.name}_sum`, labels: series.labels, value: series.sum });
      values.push({ metricName: `${this.name}_count`, labels: series.labels, value: series.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.series.clear();
  }
}
