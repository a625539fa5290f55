/**
 * `npm run bench -- memory`: one real gateway process, its cache filled by real evals (one per subscriber) to
 * 100,000 and then 1,000,000 subscribers (20 features, 5 plans, 10% with overrides); RSS (from /proc) and V8
 * heap (from its /metrics, after a full collection) at each step, per cached subscriber above the process's warm
 * baseline.
 * BENCH_MEMORY_SUBSCRIBERS changes the largest step (default 1,000,000).
 */
import {
  createWorld,
  type BenchWorld,
  envNumber,
  freePort,
  healthy,
  log,
  metric,
  residentBytes,
  startNode,
} from '../harness.ts';
import { drive } from '../load.ts';
import { DEFAULT_SHAPE } from '../seed.ts';

export interface MemoryStep {
  subscribers: number;
  cachedSubscribers: number;
  rssBytes: number;
  heapUsedBytes: number;
  estimatedCacheBytes: number;
  rssPerSubscriber: number;
  heapPerSubscriber: number;
  warmRps: number;
  non2xx: number;
}

export interface MemoryResult {
  mode: 'memory';
  date: string;
  shape: { features: number; plans: number; subscribers: number };
  cacheMb: number;
  baseline: { rssBytes: number; heapUsedBytes: number };
  steps: MemoryStep[];
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A full collection in the gateway (bench/src/gc-on-signal.mjs), so the readings are what it really holds. */
export async function collectGarbage(pid: number): Promise<void> {
  await pause(1000);
  process.kill(pid, 'SIGUSR2');
  await pause(2000);
}

/**
 * Admin and one gateway for `world`, the gateway able to collect its garbage on a signal (collectGarbage) and its
 * cache bounded by `cacheMb`: what the memory modes read, with the gateway's URL and its metrics' URL.
 */
export async function startMeasuredGateway(
  world: BenchWorld,
  cacheMb: number,
): Promise<{ pid: number; url: string; metricsUrl: string }> {
  const [gatewayPort, metricsPort] = [await freePort(), await freePort()];
  startNode('admin/src/server.ts', world.env);
  const gateway = startNode(
    'gateway/src/server.ts',
    {
      ...world.env,
      GATEWAY_PORT: String(gatewayPort),
      GATEWAY_METRICS_PORT: String(metricsPort),
      GATEWAY_CACHE_MB: String(cacheMb),
    },
    { nodeArgs: ['--expose-gc', '--import', './bench/src/gc-on-signal.mjs'] },
  );
  const url = `http://127.0.0.1:${gatewayPort}`;
  await Promise.all([healthy(`${world.adminUrl}/healthz`), healthy(`${url}/healthz`)]);
  return { pid: gateway.pid, url, metricsUrl: `http://127.0.0.1:${metricsPort}` };
}

export async function runMemory(): Promise<MemoryResult> {
  const largest = envNumber('BENCH_MEMORY_SUBSCRIBERS', 1_000_000);
  const shape = { ...DEFAULT_SHAPE, subscribers: largest };
  const cacheMb = 1024;
  const world = await createWorld(shape);
  try {
    const gateway = await startMeasuredGateway(world, cacheMb);
    const { url, metricsUrl } = gateway;
    const load = {
      url,
      apiKey: world.apiKey,
      features: shape.features,
      connections: 64,
      route: 'check' as const,
    };
    // The warm baseline: code loaded, the hot path compiled, the catalog cached, a handful of subscribers.
    await drive({ ...load, subscribers: 100, amount: 20_000 });
    await collectGarbage(gateway.pid);
    const baseline = {
      rssBytes: residentBytes(gateway.pid),
      heapUsedBytes: await metric(metricsUrl, 'nodejs_heap_size_used_bytes'),
    };
    log(
      `baseline: RSS ${(baseline.rssBytes / 2 ** 20).toFixed(0)} MiB, heap ${(baseline.heapUsedBytes / 2 ** 20).toFixed(0)} MiB`,
    );

    const steps: MemoryStep[] = [];
    for (const subscribers of [100_000, largest].filter(
      (n, i, all) => n <= largest && all.indexOf(n) === i,
    )) {
      const started = Date.now();
      const warm = await drive({ ...load, subscribers, amount: subscribers });
      const warmSeconds = (Date.now() - started) / 1000;
      await collectGarbage(gateway.pid);
      const cachedSubscribers = await metric(metricsUrl, 'gateway_cache_subscribers');
      const rssBytes = residentBytes(gateway.pid);
      const heapUsedBytes = await metric(metricsUrl, 'nodejs_heap_size_used_bytes');
      const step: MemoryStep = {
        subscribers,
        cachedSubscribers,
        rssBytes,
        heapUsedBytes,
        estimatedCacheBytes: await metric(metricsUrl, 'gateway_cache_estimated_bytes'),
        rssPerSubscriber: (rssBytes - baseline.rssBytes) / cachedSubscribers,
        heapPerSubscriber: (heapUsedBytes - baseline.heapUsedBytes) / cachedSubscribers,
        warmRps: subscribers / warmSeconds,
        non2xx: warm.non2xx,
      };
      log(
        `${subscribers} subscribers: ${cachedSubscribers} cached, RSS ${(rssBytes / 2 ** 20).toFixed(0)} MiB ` +
          `(${step.rssPerSubscriber.toFixed(0)} B each), heap ${(heapUsedBytes / 2 ** 20).toFixed(0)} MiB ` +
          `(${step.heapPerSubscriber.toFixed(0)} B each), non-2xx ${warm.non2xx}`,
      );
      steps.push(step);
    }
    return { mode: 'memory', date: new Date().toISOString(), shape, cacheMb, baseline, steps };
  } finally {
    await world.cleanup();
  }
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
const count = (n: number) => Math.round(n).toLocaleString('en-US');

export function renderMemory(result: MemoryResult): string {
  const rows = result.steps.map(
    (s) =>
      `| ${count(s.subscribers)} | ${count(s.cachedSubscribers)} | ${mib(s.rssBytes)} | ${mib(s.heapUsedBytes)} | ` +
      `${count(s.rssPerSubscriber)} B | ${count(s.heapPerSubscriber)} B | ${mib(s.estimatedCacheBytes)} | ${s.non2xx} |`,
  );
  return [
    `One gateway process, ${result.shape.features} features, ${result.shape.plans} plans, 10% of subscribers with an ` +
      `override, each subscriber cached by a real eval; warm baseline ${mib(result.baseline.rssBytes)} RSS, ` +
      `${mib(result.baseline.heapUsedBytes)} heap (${result.date.slice(0, 10)}):`,
    '',
    '| subscribers evaluated | cached | RSS | heap used | RSS per subscriber | heap per subscriber | cache estimate | non-2xx |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
