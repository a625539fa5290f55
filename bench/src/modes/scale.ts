/**
 * `npm run bench -- scale`: three gateways over one admin and one Redis.
 * 1. One gateway alone, then the same load spread over the three: aggregate throughput (on this 2-core machine
 *    the three share the cores with Redis and the load generator, so this shows what spreading costs, not
 *    what more machines would add).
 * 2. Metering is exact across them: the month's count in Redis moves by exactly the 2xx evals the clients saw.
 * 3. Read-your-writes under load: while the three are loaded, a writer sets an override to 1, 2, 3, ...
 *    through the gateways in turn, and readers on every gateway check it without pause; a read that starts
 *    after write k's 2xx must see k or later. Each request count is fixed (no request is cut off in flight).
 * 4. Metered usage is exact across them (scale-metered.ts): consumes against hard limits allowed exactly
 *    min(attempts, limit) per subscriber, and reports (with repeats of their idempotency keys) counted exactly, as
 *    the used figures read back afterwards show. The worker runs, as deployed (it persists the balances).
 */
import { spawnSync } from 'node:child_process';
import { periodOf } from '@ent/common/metering/period';
import { redisKeys } from '@ent/common/redis/keys';
import {
  createWorld,
  envNumber,
  freePort,
  healthy,
  log,
  raiseUsageEventRate,
  startNode,
  type BenchWorld,
} from '../harness.ts';
import { drive, type LoadFigures } from '../load.ts';
import { DEFAULT_SHAPE, METERED_EVENTS_FEATURE, METERED_FEATURE } from '../seed.ts';
import { meteredPhase, renderMeteredScale, type MeteredScale } from './scale-metered.ts';

export interface ReadYourWrites {
  writes: number;
  reads: number;
  /** Reads that started after a write's 2xx and saw an older value. */
  staleReads: number;
  /** Reads that started while a write was in flight (either value is correct for them). */
  concurrentReads: number;
  readsPerGateway: number[];
}

export interface ScaleResult {
  mode: 'scale';
  date: string;
  settings: { requestsPerPhase: number; connections: number; subscribers: number; features: number };
  single: { rps: number; p99: number; requests: number };
  spread: { rps: number; p99: number; requests: number; perGateway: number[] };
  metering: { counted: number; seen2xx: number; error: number };
  readYourWrites: ReadYourWrites;
  /** Absent from results written before metered usage. */
  metered?: MeteredScale;
}

const READ_TARGET = { subscriber: 'sub-1', feature: 'feature-00' };

function monthCount(world: BenchWorld): number {
  const key = redisKeys(world.env.REDIS_KEY_PREFIX!).evalUsage(world.organizationId, periodOf(Date.now()));
  return Number(spawnSync('redis-cli', ['-u', world.redisUrl, 'HGET', key, 'count'], { encoding: 'utf8' }).stdout.trim() || 0);
}

/** A writer and readers on every gateway, until `until()` says stop (the writer stops after `maxWrites`). */
async function readYourWrites(world: BenchWorld, urls: string[], loadDone: Promise<unknown>, maxWrites: number) {
  const headers = { 'content-type': 'application/json', 'x-api-key': world.apiKey };
  const writes: { value: number; sentAt: number; answeredAt: number }[] = [];
  const reads: { gateway: number; startedAt: number; value: number }[] = [];
  let evals2xx = 0;
  let stop = false;
  void loadDone.then(() => (stop = true));

  const writer = async () => {
    for (let value = 1; value <= maxWrites && !stop; value++) {
      const sentAt = performance.now();
      const res = await fetch(`${urls[value % urls.length]}/org/subscribers/${READ_TARGET.subscriber}/overrides/${READ_TARGET.feature}`, {
        method: 'PUT',
        headers,
        body: JSON.stringify({ kind: 'limit', limit: value }),
      });
      await res.text();
      if (res.status !== 200) throw new Error(`override write ${value} answered ${res.status}`);
      writes.push({ value, sentAt, answeredAt: performance.now() });
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    stop = true;
  };
  const reader = async (gateway: number) => {
    while (!stop) {
      const startedAt = performance.now();
      const res = await fetch(`${urls[gateway]}/org/subscribers/${READ_TARGET.subscriber}/entitlements/check`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ feature: READ_TARGET.feature }),
      });
      const body = (await res.json()) as { limit?: number | null };
      if (res.status !== 200) throw new Error(`read answered ${res.status}`);
      evals2xx += 1;
      reads.push({ gateway, startedAt, value: body.limit ?? -1 });
    }
  };
  await Promise.all([writer(), ...urls.flatMap((_, g) => [reader(g), reader(g)])]);

  let staleReads = 0;
  let concurrentReads = 0;
  for (const read of reads) {
    // The newest write answered before this read started: the read must show it (or a later one).
    const settled = writes.filter((w) => w.answeredAt <= read.startedAt).at(-1);
    if (settled && read.value < settled.value) staleReads += 1;
    if (writes.some((w) => w.sentAt <= read.startedAt && read.startedAt < w.answeredAt)) concurrentReads += 1;
  }
  const result: ReadYourWrites = {
    writes: writes.length,
    reads: reads.length,
    staleReads,
    concurrentReads,
    readsPerGateway: urls.map((_, g) => reads.filter((r) => r.gateway === g).length),
  };
  return { result, evals2xx };
}

const ok = (figures: LoadFigures) => figures.statuses['200'] ?? 0;

export async function runScale(): Promise<ScaleResult> {
  const connections = envNumber('BENCH_CONNECTIONS', 63);
  const requestsPerPhase = envNumber('BENCH_SCALE_REQUESTS', 150_000);
  const meteredSubscribers = envNumber('BENCH_SCALE_METERED_SUBSCRIBERS', 60);
  const shape = {
    ...DEFAULT_SHAPE,
    subscribers: envNumber('BENCH_SUBSCRIBERS', 20_000),
    // Hard limits by plan (a subscriber with two subscriptions gets the larger); reports go to the unlimited one.
    metered: [
      { key: METERED_FEATURE, limits: [100, 150, 200, 300, 500] },
      { key: METERED_EVENTS_FEATURE, limits: [null] },
    ],
  };
  const world = await createWorld(shape);
  try {
    const ports = [await freePort(), await freePort(), await freePort()];
    startNode('admin/src/server.ts', world.env);
    startNode('admin/src/worker.ts', world.env);
    raiseUsageEventRate(world, 1_000_000);
    for (const port of ports) startNode('gateway/src/server.ts', { ...world.env, GATEWAY_PORT: String(port) });
    const urls = ports.map((port) => `http://127.0.0.1:${port}`);
    await Promise.all([world.adminUrl, ...urls].map((u) => healthy(`${u}/healthz`)));
    const load = { apiKey: world.apiKey, subscribers: shape.subscribers, features: shape.features, route: 'check' as const };
    for (const url of urls) await drive({ ...load, url, connections, amount: shape.subscribers });

    log(`one gateway: ${requestsPerPhase} checks over ${connections} connections`);
    let started = performance.now();
    const single = await drive({ ...load, url: urls[0]!, connections, amount: requestsPerPhase });
    const singleRps = requestsPerPhase / ((performance.now() - started) / 1000);

    const countBefore = monthCount(world);
    const perGateway = Math.floor(requestsPerPhase / urls.length);
    const spreadLoad = () =>
      Promise.all(
        urls.map((url, i) =>
          drive({ ...load, url, connections: Math.floor(connections / urls.length), amount: perGateway, offset: i * 1000 }),
        ),
      );
    log(`three gateways: the same ${requestsPerPhase} checks, a third on each`);
    started = performance.now();
    const spread = await spreadLoad();
    const spreadSeconds = (performance.now() - started) / 1000;

    log('three gateways again, with a writer and readers on every gateway');
    const loads = spreadLoad();
    const [underWrites, ryw] = await Promise.all([loads, readYourWrites(world, urls, loads, 400)]);
    const seen2xx = [...spread, ...underWrites].reduce((sum, f) => sum + ok(f), 0) + ryw.evals2xx;
    // Refunds and settlements are sent after the answer: give the last of them a moment to land.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const counted = monthCount(world) - countBefore;
    log(`metering: counted ${counted}, 2xx seen ${seen2xx}; read-your-writes: ${JSON.stringify(ryw.result)}`);
    const metered = await meteredPhase(world.apiKey, urls, meteredSubscribers);
    log(`metered: ${JSON.stringify(metered)}`);
    return {
      mode: 'scale',
      date: new Date().toISOString(),
      settings: { requestsPerPhase, connections, subscribers: shape.subscribers, features: shape.features },
      single: { rps: singleRps, p99: single.p99, requests: requestsPerPhase },
      spread: {
        rps: (perGateway * urls.length) / spreadSeconds,
        p99: Math.max(...spread.map((f) => f.p99)),
        requests: perGateway * urls.length,
        perGateway: spread.map((f) => f.requests),
      },
      metering: { counted, seen2xx, error: counted - seen2xx },
      readYourWrites: ryw.result,
      metered,
    };
  } finally {
    await world.cleanup();
  }
}

export function renderScale(result: ScaleResult): string {
  const { single, spread, metering: m, readYourWrites: r } = result;
  const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
  return [
    `Three gateways over one admin and one Redis, ${fmt(result.settings.requestsPerPhase)} checks per phase, ` +
      `${result.settings.connections} connections in all (${result.date.slice(0, 10)}):`,
    '',
    '| phase | req/s | worst p99 | 2xx evals seen | counted in Redis | stale reads |',
    '|---|---|---|---|---|---|',
    `| one gateway | ${fmt(single.rps)} | ${single.p99.toFixed(1)} ms | | | |`,
    `| three gateways | ${fmt(spread.rps)} (${(spread.rps / single.rps).toFixed(2)}× one) | ${spread.p99.toFixed(1)} ms | | | |`,
    `| three gateways again, with a writer and readers | | | ${fmt(m.seen2xx)} (both three-gateway phases) | ` +
      `${fmt(m.counted)} (error ${m.error}) | ${r.staleReads} of ${fmt(r.reads)} |`,
    '',
    `Read-your-writes: ${r.writes} override writes (each through the next gateway) while ${fmt(r.reads)} reads ran on ` +
      `all three (${r.readsPerGateway.map(fmt).join(' / ')}); a read that started after a write's 2xx saw an older ` +
      `value ${r.staleReads} times (${r.concurrentReads} reads overlapped a write and may see either value). All ` +
      'processes share this 2-core machine, so three gateways cannot do more than one: the aggregate shows the cost ' +
      'of spreading, and more machines are what would add throughput.',
    ...(result.metered ? renderMeteredScale(result.metered) : []),
  ].join('\n');
}
