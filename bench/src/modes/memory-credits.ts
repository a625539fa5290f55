/**
 * `npm run bench -- memory-credits`: what a gateway holds for subscribers with credits (issue 35), against what its
 * cache bound (GATEWAY_CACHE_MB) counts for them. One real gateway, 20,000 subscribers (BENCH_SUBSCRIBERS), each
 * holding five live credits on each of two metered features (as the credits mode seeds them). Steps, each a real
 * request per subscriber (twice) and then a full collection: a check (the subscriber's entry and documents cached),
 * a consume of a metered feature without credits, a consume of the feature whose credits are held (allowance left),
 * a consume that spends a credit. Per step: the V8 heap used and the cache's estimate, per subscriber above the step
 * before.
 */
import { createWorld, envNumber, log, metric } from '../harness.ts';
import { drive, type RouteKind } from '../load.ts';
import { CREDITED_METERED, CREDITS_PER_SUBSCRIBER, DEFAULT_SHAPE } from '../seed.ts';
import { collectGarbage, startMeasuredGateway } from './memory.ts';


export interface CreditsMemoryStep {
  name: string;
  route: RouteKind;
  heapUsedBytes: number;
  estimatedCacheBytes: number;
  /** Above the step before, per subscriber. */
  heapPerSubscriber: number;
  estimatePerSubscriber: number;
  non2xx: number;
}

export interface CreditsMemoryResult {
  mode: 'memory-credits';
  date: string;
  settings: { subscribers: number; creditsPerSubscriber: number; cacheMb: number };
  baseline: { heapUsedBytes: number; estimatedCacheBytes: number };
  steps: CreditsMemoryStep[];
}

const STEPS: { name: string; route: RouteKind }[] = [
  { name: 'checked (entry and documents cached)', route: 'check' },
  { name: 'a metered feature consumed, no credits', route: 'consume' },
  { name: 'five credits held, allowance left', route: 'consume-credits-held' },
  { name: 'five credits, one spent per consume', route: 'consume-credits-spent' },
];

export async function runCreditsMemory(): Promise<CreditsMemoryResult> {
  const subscribers = envNumber('BENCH_SUBSCRIBERS', 20_000);
  const cacheMb = 1024;
  const shape = {
    ...DEFAULT_SHAPE,
    subscribers,
    metered: CREDITED_METERED,
  };
  const world = await createWorld(shape);
  try {
    const gateway = await startMeasuredGateway(world, cacheMb);
    const { url, metricsUrl } = gateway;
    const load = { url, apiKey: world.apiKey, features: shape.features, connections: 64 };
    const reading = async () => {
      await collectGarbage(gateway.pid);
      return {
        heapUsedBytes: await metric(metricsUrl, 'nodejs_heap_size_used_bytes'),
        estimatedCacheBytes: await metric(metricsUrl, 'gateway_cache_estimated_bytes'),
      };
    };
    // The warm baseline: code loaded and compiled on every route, a handful of subscribers.
    for (const { route } of STEPS) await drive({ ...load, route, subscribers: 100, amount: 5_000 });
    const baseline = await reading();
    let before = baseline;
    const steps: CreditsMemoryStep[] = [];
    for (const { name, route } of STEPS) {
      const driven = await drive({ ...load, route, subscribers, amount: subscribers * 2 });
      const now = await reading();
      const step: CreditsMemoryStep = {
        name,
        route,
        ...now,
        heapPerSubscriber: (now.heapUsedBytes - before.heapUsedBytes) / subscribers,
        estimatePerSubscriber: (now.estimatedCacheBytes - before.estimatedCacheBytes) / subscribers,
        non2xx: driven.non2xx,
      };
      log(
        `${name}: heap ${(now.heapUsedBytes / 2 ** 20).toFixed(1)} MiB (+${step.heapPerSubscriber.toFixed(0)} B each), ` +
          `estimate +${step.estimatePerSubscriber.toFixed(0)} B each, non-2xx ${driven.non2xx}`,
      );
      steps.push(step);
      before = now;
    }
    return {
      mode: 'memory-credits',
      date: new Date().toISOString(),
      settings: { subscribers, creditsPerSubscriber: CREDITS_PER_SUBSCRIBER, cacheMb },
      baseline,
      steps,
    };
  } finally {
    await world.cleanup();
  }
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
const bytes = (n: number) => `${Math.round(n).toLocaleString('en-US')} B`;

export function renderCreditsMemory(result: CreditsMemoryResult): string {
  const { settings: s } = result;
  const rows = result.steps.map(
    (step) =>
      `| ${step.name} | ${mib(step.heapUsedBytes)} | ${bytes(step.heapPerSubscriber)} | ` +
      `${mib(step.estimatedCacheBytes)} | ${bytes(step.estimatePerSubscriber)} | ${step.non2xx} |`,
  );
  const held = result.steps.reduce((sum, step) => sum + step.heapPerSubscriber, 0);
  const counted = result.steps.reduce((sum, step) => sum + step.estimatePerSubscriber, 0);
  return [
    `One gateway process, ${s.subscribers.toLocaleString('en-US')} subscribers, each holding ${s.creditsPerSubscriber} ` +
      `live credits on each of two metered features; each step a request per subscriber (twice), then a full ` +
      `collection; warm baseline ${mib(result.baseline.heapUsedBytes)} heap (${result.date.slice(0, 10)}):`,
    '',
    '| after | heap used | heap per subscriber (over the step before) | cache estimate | estimate per subscriber | non-2xx |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    `All told ${bytes(held)} of heap per subscriber, of which the cache's bound (GATEWAY_CACHE_MB) counts ` +
      `${bytes(counted)} (${Math.round((counted / held) * 100)} %).`,
  ].join('\n');
}
