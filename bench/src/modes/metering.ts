/**
 * `npm run bench -- metering`: metered usage (DESIGN.md §5) on the gateway.
 * 1. `consume` of 1 against a large metered limit, the same check of the metered feature without deducting, the
 *    plain check (flags and limits, as `npm run bench`), the bare route, the round-trip floor and an A/A control,
 *    in alternating rounds of one run: consume against the check (targets: at least 0.9 of its throughput, at most
 *    1.15× its CPU per request), and each against the bare route.
 * 2. `POST /org/usage-events` with batches of 1,000 reports: p50/p99 (target p99 under 20 ms) from one connection,
 *    with and without an idempotency key per event, and from four.
 * 3. Exactness: afterwards, the used figures in Redis add up to the consumes answered 2xx and the events of the
 *    batches answered 2xx.
 * A private Redis (the batches' idempotency keys would otherwise fill the shared one), the worker running as deployed
 * (it persists the balances the consumes change; its CPU is reported apart).
 */
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { redisKeys } from '@ent/common/redis/keys';
import {
  createWorld,
  driveMeasured,
  envNumber,
  freePort,
  healthy,
  log,
  median,
  processCpuSeconds,
  raiseUsageEventRate,
  startNode,
  startPrivateRedis,
  type BenchWorld,
} from '../harness.ts';
import { drive, type LoadOptions } from '../load.ts';
import {
  alternatingRounds,
  measureTarget,
  mediansOf,
  totalCpu,
  type Target,
  type TargetFigures,
} from '../rounds.ts';
import { DEFAULT_SHAPE, LARGE_LIMIT, METERED_EVENTS_FEATURE, METERED_FEATURE } from '../seed.ts';

export interface BatchFigures {
  name: string;
  connections: number;
  idempotencyKeys: boolean;
  events: number;
  batches: number;
  p50: number;
  p95: number;
  p99: number;
  batchesPerSecond: number;
  statuses: Record<string, number>;
  /** The gateway's and Redis's CPU per event. */
  serverCpuUsPerEvent: number;
  redisCpuUsPerEvent: number;
}

export interface MeteringResult {
  mode: 'metering';
  date: string;
  settings: {
    seconds: number;
    rounds: number;
    connections: number;
    subscribers: number;
    features: number;
    plans: number;
    batchEvents: number;
    batches: number;
  };
  /** One-minute load average of the machine when the run started and ended (it is shared: say how busy it was). */
  loadAverage: { start: number; end: number };
  targets: TargetFigures[];
  rounds: TargetFigures[][];
  /** Medians of per-round ratios. */
  ratios: {
    consumeThroughputVsCheck: number;
    consumeCpuVsCheck: number;
    consumeP99VsCheck: number;
    meteredCheckThroughputVsCheck: number;
    meteredCheckCpuVsCheck: number;
    checkThroughputVsBare: number;
    checkCpuVsBare: number;
    consumeThroughputVsBare: number;
    consumeCpuVsBare: number;
    floorThroughputVsBare: number;
    floorCpuVsBare: number;
    controlThroughputVsBare: number;
    controlCpuVsBare: number;
  };
  /** The worker's CPU over the rounds, per consume answered in them. */
  workerCpuUsPerConsume: number;
  batches: BatchFigures[];
  exactness: {
    consumes2xx: number;
    consumedInRedis: number;
    events2xx: number;
    reportedInRedis: number;
  };
}

const BARE = 'bare fastify';
const CHECK = 'gateway check';
const CONSUME = 'gateway consume 1';
const METERED_CHECK = 'gateway check, metered feature';
const FLOOR = 'bare route + round trip only';
const CONTROL = 'bare fastify, second process';

/** The sum of `u` over the organization's balances of one feature in Redis. */
async function usedInRedis(world: BenchWorld, feature: string): Promise<number> {
  const redis = new Redis(world.redisUrl);
  try {
    const pattern = redisKeys(world.env.REDIS_KEY_PREFIX!).meteredBalance(
      world.organizationId,
      `*|${feature}|*`,
    );
    let total = 0;
    for await (const keys of redis.scanStream({ match: pattern, count: 1000 }) as AsyncIterable<string[]>) {
      if (keys.length === 0) continue;
      const pipeline = redis.pipeline();
      for (const key of keys) pipeline.hget(key, 'u');
      for (const [, value] of (await pipeline.exec()) ?? []) total += Number(value ?? 0);
    }
    return total;
  } finally {
    redis.disconnect();
  }
}

/**
 * Before measuring anything: a consume deducts and a batch is applied, as DESIGN.md §5 says (a gateway answering them
 * some other way would be measured doing something else). One consume and one event, both counted in the totals.
 */
async function preflight(gatewayUrl: string, apiKey: string): Promise<void> {
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${gatewayUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const consumed = await post('/org/subscribers/sub-0/entitlements/check', {
    feature: METERED_FEATURE,
    consume: 1,
  });
  if (consumed.status !== 200 || consumed.body.allowed !== true || consumed.body.used !== 1)
    throw new Error(`a consume answered ${consumed.status} ${JSON.stringify(consumed.body)}`);
  const reported = await post('/org/usage-events', {
    events: [{ subscriber_id: 'sub-0', feature: METERED_EVENTS_FEATURE, delta: 1 }],
  });
  const [result] = (reported.body.results ?? []) as { used?: unknown }[];
  if (reported.status !== 200 || result?.used !== 1)
    throw new Error(`a batch of one event answered ${reported.status} ${JSON.stringify(reported.body)}`);
}

const ok = (statuses: Record<string, number>) =>
  Object.entries(statuses).reduce((sum, [status, n]) => sum + (status.startsWith('2') ? n : 0), 0);

export async function runMetering(): Promise<MeteringResult> {
  const seconds = envNumber('BENCH_SECONDS', 10);
  const rounds = envNumber('BENCH_ROUNDS', 5);
  const connections = envNumber('BENCH_CONNECTIONS', 64);
  const batchCount = envNumber('BENCH_BATCHES', 400);
  const batchEvents = 1000;
  const startLoad = loadavg()[0]!;
  const shape = {
    ...DEFAULT_SHAPE,
    subscribers: envNumber('BENCH_SUBSCRIBERS', DEFAULT_SHAPE.subscribers),
    metered: [
      { key: METERED_FEATURE, limits: [LARGE_LIMIT] },
      { key: METERED_EVENTS_FEATURE, limits: [null] },
    ],
  };
  const world = await createWorld(shape, { redisUrl: await startPrivateRedis() });
  try {
    raiseUsageEventRate(world, 1_000_000);
    const [gatewayPort, barePort, controlPort, floorPort] = [
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
    ];
    startNode('admin/src/server.ts', world.env);
    const worker = startNode('admin/src/worker.ts', world.env);
    const gateway = startNode('gateway/src/server.ts', { ...world.env, GATEWAY_PORT: String(gatewayPort) });
    const bare = startNode('bench/src/bare-server.ts', { ...world.env, BARE_PORT: String(barePort) });
    const control = startNode('bench/src/bare-server.ts', { ...world.env, BARE_PORT: String(controlPort) });
    const floor = startNode('bench/src/round-trip-floor.ts', { ...world.env, BARE_PORT: String(floorPort) });
    const url = (port: number) => `http://127.0.0.1:${port}`;
    await Promise.all(
      [world.adminUrl, url(gatewayPort), url(barePort), url(controlPort), url(floorPort)].map((u) =>
        healthy(`${u}/healthz`),
      ),
    );
    const load = { apiKey: world.apiKey, subscribers: shape.subscribers, features: shape.features };
    await preflight(url(gatewayPort), world.apiKey);
    let consumes2xx = 1;
    let events2xx = 1;
    log(`warming: a check, a metered check and a consume for each of the ${shape.subscribers} subscribers`);
    const warming: LoadOptions = { ...load, url: url(gatewayPort), connections, route: 'check' };
    await drive({ ...warming, amount: shape.subscribers });
    await drive({ ...warming, route: 'metered-check', amount: shape.subscribers });
    consumes2xx += ok((await drive({ ...warming, route: 'consume', amount: shape.subscribers })).statuses);
    for (const port of [barePort, controlPort, floorPort])
      await drive({ ...load, url: url(port), connections, route: 'check', seconds: 2 });

    const targets: Target[] = [
      { name: BARE, port: barePort, pid: bare.pid, route: 'check' },
      { name: CHECK, port: gatewayPort, pid: gateway.pid, route: 'check' },
      { name: CONSUME, port: gatewayPort, pid: gateway.pid, route: 'consume' },
      { name: METERED_CHECK, port: gatewayPort, pid: gateway.pid, route: 'metered-check' },
      { name: FLOOR, port: floorPort, pid: floor.pid, route: 'check' },
      { name: CONTROL, port: controlPort, pid: control.pid, route: 'check' },
    ];
    log(`measuring: ${connections} connections, ${rounds} alternating rounds of ${seconds} s per target`);
    const workerBefore = processCpuSeconds(worker.pid);
    const byRound = await alternatingRounds(targets, rounds, (target) =>
      measureTarget(target, world.redisUrl, load, connections, seconds),
    );
    // The worker persists what the last round changed within a second or so.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const workerSeconds = processCpuSeconds(worker.pid) - workerBefore;
    const at = (name: string) => targets.findIndex((t) => t.name === name);
    const [bareAt, checkAt, consumeAt, meteredAt, floorAt, controlAt] = [
      BARE,
      CHECK,
      CONSUME,
      METERED_CHECK,
      FLOOR,
      CONTROL,
    ].map(at) as [number, number, number, number, number, number];
    const roundRatio = (of: number, to: number, pick: (f: TargetFigures) => number) =>
      median(byRound.map((r) => pick(r[of]!) / pick(r[to]!)));
    const rps = (f: TargetFigures) => f.rps;
    const roundConsumes = byRound.reduce((sum, r) => sum + ok(r[consumeAt]!.statuses), 0);
    consumes2xx += roundConsumes;
    const ratios = {
      consumeThroughputVsCheck: roundRatio(consumeAt, checkAt, rps),
      consumeCpuVsCheck: roundRatio(consumeAt, checkAt, totalCpu),
      consumeP99VsCheck: roundRatio(consumeAt, checkAt, (f) => f.p99),
      meteredCheckThroughputVsCheck: roundRatio(meteredAt, checkAt, rps),
      meteredCheckCpuVsCheck: roundRatio(meteredAt, checkAt, totalCpu),
      checkThroughputVsBare: roundRatio(checkAt, bareAt, rps),
      checkCpuVsBare: roundRatio(checkAt, bareAt, totalCpu),
      consumeThroughputVsBare: roundRatio(consumeAt, bareAt, rps),
      consumeCpuVsBare: roundRatio(consumeAt, bareAt, totalCpu),
      floorThroughputVsBare: roundRatio(floorAt, bareAt, rps),
      floorCpuVsBare: roundRatio(floorAt, bareAt, totalCpu),
      controlThroughputVsBare: roundRatio(controlAt, bareAt, rps),
      controlCpuVsBare: roundRatio(controlAt, bareAt, totalCpu),
    };

    const variants = [
      { name: 'one connection', connections: 1, idempotencyKeys: false },
      { name: 'one connection, an idempotency key per event', connections: 1, idempotencyKeys: true },
      { name: 'four connections', connections: 4, idempotencyKeys: false },
    ];
    const batches: BatchFigures[] = [];
    for (const variant of variants) {
      log(`usage events: ${batchCount} batches of ${batchEvents}, ${variant.name}`);
      const started = performance.now();
      const measured = await driveMeasured(gateway.pid, world.redisUrl, {
        ...load,
        url: url(gatewayPort),
        route: 'usage-events',
        connections: variant.connections,
        amount: batchCount,
        batchEvents,
        idempotencyKeys: variant.idempotencyKeys,
      });
      const elapsedSeconds = (performance.now() - started) / 1000;
      events2xx += ok(measured.statuses) * batchEvents;
      batches.push({
        ...variant,
        events: batchEvents,
        batches: measured.requests,
        p50: measured.p50,
        p95: measured.p95,
        p99: measured.p99,
        batchesPerSecond: measured.requests / elapsedSeconds,
        statuses: measured.statuses,
        serverCpuUsPerEvent: measured.serverCpuUs / batchEvents,
        redisCpuUsPerEvent: measured.redisCpuUs / batchEvents,
      });
    }
    const exactness = {
      consumes2xx,
      consumedInRedis: await usedInRedis(world, METERED_FEATURE),
      events2xx,
      reportedInRedis: await usedInRedis(world, METERED_EVENTS_FEATURE),
    };
    log(`exactness: ${JSON.stringify(exactness)}`);
    return {
      mode: 'metering',
      date: new Date().toISOString(),
      settings: {
        seconds,
        rounds,
        connections,
        subscribers: shape.subscribers,
        features: shape.features,
        plans: shape.plans,
        batchEvents,
        batches: batchCount,
      },
      loadAverage: { start: startLoad, end: loadavg()[0]! },
      targets: mediansOf(targets, byRound),
      rounds: byRound,
      ratios,
      workerCpuUsPerConsume: (workerSeconds / Math.max(1, roundConsumes)) * 1e6,
      batches,
      exactness,
    };
  } finally {
    await world.cleanup();
  }
}

const us = (value: number) => `${value.toFixed(0)} µs`;
const fmt = (value: number) => Math.round(value).toLocaleString('en-US');
const cpu = (f: { serverCpuUs: number; redisCpuUs: number }) =>
  `${us(f.serverCpuUs)}${f.redisCpuUs >= 0.5 ? ` + ${us(f.redisCpuUs)} Redis` : ''}`;
const meets = (holds: boolean) => (holds ? 'met' : 'NOT met');

export function renderMetering(result: MeteringResult): string {
  const { settings: s, ratios: r, exactness: e } = result;
  const rows = result.targets.map(
    (t) =>
      `| ${t.name} | ${fmt(t.rps)} | ${t.p50.toFixed(1)} ms | ${t.p99.toFixed(1)} ms | ${cpu(t)} | ${t.non2xx} |`,
  );
  const batchRows = result.batches.map(
    (b) =>
      `| ${b.name} | ${fmt(b.batches)} | ${b.p50.toFixed(1)} ms | ${b.p99.toFixed(1)} ms | ${fmt(b.batchesPerSecond * b.events)} | ` +
      `${b.serverCpuUsPerEvent.toFixed(1)} µs + ${b.redisCpuUsPerEvent.toFixed(1)} µs Redis | ${b.batches - ok(b.statuses)} |`,
  );
  const worstP99 = Math.max(...result.batches.filter((b) => b.connections === 1).map((b) => b.p99));
  return [
    `Medians of ${s.rounds} alternating rounds of ${s.seconds} s, ${s.connections} connections, ${fmt(s.subscribers)} ` +
      `subscribers (${s.features} features, ${s.plans} plans, one metered feature with a limit of 10^12 on every ` +
      `plan), a private Redis, the worker running, ${result.date.slice(0, 10)}; load average ` +
      `${result.loadAverage.start.toFixed(1)} at the start, ${result.loadAverage.end.toFixed(1)} at the end (2 cores):`,
    '',
    '| target | req/s | p50 | p99 | CPU per request | non-2xx |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    `Same-run ratios (medians of per-round ratios): \`consume\` of 1 against the plain check **${r.consumeThroughputVsCheck.toFixed(2)}** ` +
      `of its throughput (target at least 0.9: ${meets(r.consumeThroughputVsCheck >= 0.9)}) at ` +
      `**${r.consumeCpuVsCheck.toFixed(2)}×** its CPU per request, gateway and Redis (target at most 1.15: ` +
      `${meets(r.consumeCpuVsCheck <= 1.15)}), ${r.consumeP99VsCheck.toFixed(2)}× its p99; the metered feature's check ` +
      `without deducting ${r.meteredCheckThroughputVsCheck.toFixed(2)} of its throughput at ${r.meteredCheckCpuVsCheck.toFixed(2)}× ` +
      `its CPU. Against the bare route: the check ${r.checkThroughputVsBare.toFixed(2)} of its throughput at ` +
      `${r.checkCpuVsBare.toFixed(2)}× its CPU, the consume ${r.consumeThroughputVsBare.toFixed(2)} at ` +
      `${r.consumeCpuVsBare.toFixed(2)}×, the round-trip floor ${r.floorThroughputVsBare.toFixed(2)} at ` +
      `${r.floorCpuVsBare.toFixed(2)}×; the A/A control ${r.controlThroughputVsBare.toFixed(2)} at ${r.controlCpuVsBare.toFixed(2)}× ` +
      `(the noise any ratio here carries). The worker spent ${us(result.workerCpuUsPerConsume)} ` +
      'per consume persisting the balances (in another process: not in the figures above).',
    '',
    `\`POST /org/usage-events\`, ${fmt(s.batches)} batches of ${fmt(s.batchEvents)} reports of 1 each (every event a ` +
      `different subscriber), one after the other per connection:`,
    '',
    '| batches sent from | batches | p50 | p99 | events/s | CPU per event | non-2xx |',
    '|---|---|---|---|---|---|---|',
    ...batchRows,
    '',
    `A batch of 1,000 from one connection: p99 ${worstP99.toFixed(1)} ms at worst (target under 20 ms: ${meets(worstP99 < 20)}). ` +
      `Exactness: ${fmt(e.consumes2xx)} consumes answered 2xx, ${fmt(e.consumedInRedis)} used in Redis afterwards ` +
      `(error ${e.consumedInRedis - e.consumes2xx}); ${fmt(e.events2xx)} events in batches answered 2xx, ` +
      `${fmt(e.reportedInRedis)} used (error ${e.reportedInRedis - e.events2xx}).`,
  ].join('\n');
}
