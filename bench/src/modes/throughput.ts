/**
 * `npm run bench` (mode `throughput`): the warm metered check next to a bare Fastify route returning the same
 * JSON, in alternating rounds of the same run (every other round in reverse order); also the gateway with metering
 * bypassed, the list route with `all=true`, OFREP single-flag evaluation, and the SDK's warm-cache `check` against a
 * raw HTTP check. A second bare process measured in the same rounds is the control: its ratio to the first is what
 * the machine's noise alone does to a ratio.
 */
import { join, relative } from 'node:path';
import { Pool } from 'undici';
import { buildServices, DEFAULT_OUTDIR } from '../../../scripts/build-services.ts';
import { EvalClient } from '../../../sdk/src/eval-client.ts';
import {
  createWorld,
  envNumber,
  freePort,
  healthy,
  log,
  median,
  metric,
  root,
  startNode,
  type BenchWorld,
} from '../harness.ts';
import { drive } from '../load.ts';
import {
  alternatingRounds as roundsOf,
  measureTarget,
  mediansOf,
  summarize,
  totalCpu,
  type Target,
  type TargetFigures,
} from '../rounds.ts';
import { DEFAULT_SHAPE, featureKey } from '../seed.ts';

export interface InProcessFigures {
  name: string;
  opsPerSecond: number;
  p50Us: number;
  p99Us: number;
  requestsSent: number;
}

export interface ThroughputResult {
  mode: 'throughput';
  date: string;
  settings: {
    seconds: number;
    rounds: number;
    connections: number;
    subscribers: number;
    features: number;
    plans: number;
  };
  /** Medians over the rounds, by target name. */
  targets: TargetFigures[];
  rounds: TargetFigures[][];
  ratios: {
    checkThroughputVsBare: number;
    checkThroughputVsBareRoundMedian: number;
    checkP99VsBare: number;
    checkCpuVsBare: number;
    /** Absent from results written before it was added. */
    checkCpuVsBareRoundMedian?: number;
    meteringThroughputCost: number;
    meteringCpuCost: number;
    listThroughputVsCheck: number;
    ofrepThroughputVsCheck: number;
    ofrepP99VsCheck: number;
    /** The gateway with no Redis round trip on its warm path, against the bare route (absent from older results). */
    noRoundTripThroughputVsBare?: number;
    noRoundTripCpuVsBare?: number;
    /**
     * A second, identical bare process against the first (A/A): medians of per-round ratios and the widest per-round
     * CPU ratio either way. Any other ratio here is within noise by that much (absent from older results).
     */
    controlThroughputVsBare?: number;
    controlCpuVsBare?: number;
    controlCpuRoundSpread?: number;
    /**
     * The bare route plus only the round trip DESIGN.md §2.2 requires (round-trip-floor.ts), against the bare route:
     * medians of per-round ratios. No gateway can do better (absent from older results).
     */
    floorThroughputVsBare?: number;
    floorCpuVsBare?: number;
    floorP99VsBare?: number;
    /**
     * The gateway as the image runs it (`npm run build`, plain node) against the same gateway through tsx (`npm
     * start`): medians of per-round ratios, compiled over tsx (absent from older results).
     */
    compiledThroughputVsTsx?: number;
    compiledCpuVsTsx?: number;
    compiledP99VsTsx?: number;
  };
  /** The warm metered check against the bare route at other numbers of connections (absent from older results). */
  byConnections?: ConcurrencyFigures[];
  sdk: InProcessFigures[];
  gatewayHeapBytes: number;
}

export interface ConcurrencyFigures {
  connections: number;
  rounds: number;
  bare: TargetFigures;
  check: TargetFigures;
  /** Medians of per-round ratios, check over bare. */
  throughputRatio: number;
  cpuRatio: number;
}

/** `concurrency` loops calling `call` for `seconds`; latency per call in microseconds. */
async function inProcess(
  name: string,
  seconds: number,
  concurrency: number,
  call: (i: number) => Promise<unknown>,
) {
  const latencies: number[] = [];
  const until = performance.now() + seconds * 1000;
  let i = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const at = performance.now();
        await call(i++);
        latencies.push((performance.now() - at) * 1000);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    name,
    opsPerSecond: latencies.length / elapsed,
    p50Us: latencies[Math.floor(latencies.length * 0.5)] ?? 0,
    p99Us: latencies[Math.floor(latencies.length * 0.99)] ?? 0,
  };
}

/** The SDK's check answered from its warm cache against the same check sent over HTTP, from this process. */
async function sdkFigures(
  world: BenchWorld,
  gatewayUrl: string,
  metricsUrl: string,
  seconds: number,
): Promise<InProcessFigures[]> {
  const cached = 1000;
  const features = DEFAULT_SHAPE.features;
  const client = new EvalClient({ baseUrl: gatewayUrl, apiKey: world.apiKey, cacheTtlMs: 10 * 60_000 });
  const pool = new Pool(gatewayUrl, { connections: 64 });
  const evals = () => metric(metricsUrl, 'http_request_duration_seconds_count');
  try {
    for (let s = 0; s < cached; s++) await client.list(`sub-${s}`);
    let before = await evals();
    const sdk = await inProcess('sdk check, warm cache', seconds, 64, (i) =>
      client.check(`sub-${i % cached}`, featureKey(i % features, features)),
    );
    const sdkRequests = (await evals()) - before;
    before = await evals();
    const body = (i: number) => JSON.stringify({ feature: featureKey(i % features, features) });
    const raw = await inProcess('raw HTTP check', seconds, 64, async (i) => {
      const res = await pool.request({
        method: 'POST',
        path: `/org/subscribers/sub-${i % cached}/entitlements/check`,
        headers: { 'content-type': 'application/json', 'x-api-key': world.apiKey },
        body: body(i),
      });
      await res.body.text();
      if (res.statusCode !== 200) throw new Error(`raw check answered ${res.statusCode}`);
    });
    const rawRequests = (await evals()) - before;
    return [
      { ...sdk, requestsSent: sdkRequests },
      { ...raw, requestsSent: rawRequests },
    ];
  } finally {
    await client.close();
    await pool.close();
  }
}

/** The A/A control: a second bare Fastify process, measured like every target. */
const CONTROL = 'bare fastify, second process';
/** The bare route plus the gate round trip and nothing else (round-trip-floor.ts). */
const FLOOR = 'bare route + round trip only';

/** The gateway's production build (`npm run build`: dist/gateway.js on plain node), next to the tsx one. */
const COMPILED = 'gateway check, compiled';

/** Besides the main run's: few connections (autocannon's default is 10), and many. */
const connectionSweep = (main: number) => [10, 256].filter((c) => c !== main);

export async function runThroughput(): Promise<ThroughputResult> {
  const seconds = envNumber('BENCH_SECONDS', 10);
  const rounds = envNumber('BENCH_ROUNDS', 5);
  const connections = envNumber('BENCH_CONNECTIONS', 64);
  const shape = { ...DEFAULT_SHAPE, subscribers: envNumber('BENCH_SUBSCRIBERS', DEFAULT_SHAPE.subscribers) };
  const world = await createWorld(shape);
  try {
    const [
      gatewayPort,
      barePort,
      unmeteredPort,
      metricsPort,
      inMemoryPort,
      controlPort,
      floorPort,
      compiledPort,
    ] = [
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
    ];
    const cpuProfile = process.env.BENCH_CPU_PROF
      ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`]
      : [];
    log('building the gateway (npm run build: dist/gateway.js)');
    await buildServices();
    startNode('admin/src/server.ts', world.env);
    const gateway = startNode(
      'gateway/src/server.ts',
      { ...world.env, GATEWAY_PORT: String(gatewayPort), GATEWAY_METRICS_PORT: String(metricsPort) },
      { nodeArgs: cpuProfile },
    );
    // Started as the image starts it: plain node, source maps on.
    const compiled = startNode(
      relative(root, join(DEFAULT_OUTDIR, 'gateway.js')),
      { ...world.env, GATEWAY_PORT: String(compiledPort), GATEWAY_METRICS_PORT: '0' },
      { compiled: true, nodeArgs: ['--enable-source-maps'] },
    );
    const bare = startNode('bench/src/bare-server.ts', { ...world.env, BARE_PORT: String(barePort) });
    const control = startNode('bench/src/bare-server.ts', { ...world.env, BARE_PORT: String(controlPort) });
    const floor = startNode('bench/src/round-trip-floor.ts', { ...world.env, BARE_PORT: String(floorPort) });
    const unmetered = startNode('bench/src/unmetered-gateway.ts', {
      ...world.env,
      GATEWAY_PORT: String(unmeteredPort),
    });
    const inMemory = startNode('bench/src/unmetered-gateway.ts', {
      ...world.env,
      GATEWAY_PORT: String(inMemoryPort),
      BENCH_GATE: 'memory',
    });
    const url = (port: number) => `http://127.0.0.1:${port}`;
    await Promise.all(
      [
        world.adminUrl,
        url(gatewayPort),
        url(barePort),
        url(unmeteredPort),
        url(inMemoryPort),
        url(controlPort),
        url(floorPort),
        url(compiledPort),
      ].map((u) => healthy(`${u}/healthz`)),
    );

    const load = {
      apiKey: world.apiKey,
      subscribers: shape.subscribers,
      features: shape.features,
      connections,
    };
    log(`warming the gateways' caches: one eval for each of the ${shape.subscribers} subscribers`);
    const started = Date.now();
    await drive({ ...load, url: url(gatewayPort), route: 'check', amount: shape.subscribers });
    await drive({ ...load, url: url(unmeteredPort), route: 'check', amount: shape.subscribers });
    await drive({ ...load, url: url(inMemoryPort), route: 'check', amount: shape.subscribers });
    await drive({ ...load, url: url(compiledPort), route: 'check', amount: shape.subscribers });
    await drive({ ...load, url: url(barePort), route: 'check', seconds: 2 });
    await drive({ ...load, url: url(controlPort), route: 'check', seconds: 2 });
    await drive({ ...load, url: url(floorPort), route: 'check', seconds: 2 });
    log(`warmed in ${Date.now() - started} ms`);

    const targets: Target[] = [
      { name: 'bare fastify', port: barePort, pid: bare.pid, route: 'check' },
      { name: 'gateway check', port: gatewayPort, pid: gateway.pid, route: 'check' },
      { name: 'unmetered check', port: unmeteredPort, pid: unmetered.pid, route: 'check' },
      { name: 'check, no round trip', port: inMemoryPort, pid: inMemory.pid, route: 'check' },
      { name: 'gateway list all=true', port: gatewayPort, pid: gateway.pid, route: 'list' },
      { name: 'gateway OFREP flag', port: gatewayPort, pid: gateway.pid, route: 'ofrep' },
      { name: CONTROL, port: controlPort, pid: control.pid, route: 'check' },
      { name: FLOOR, port: floorPort, pid: floor.pid, route: 'check' },
      { name: COMPILED, port: compiledPort, pid: compiled.pid, route: 'check' },
    ];
    const alternatingRounds = (
      of: Target[],
      count: number,
      loadConnections: number,
      loadSeconds: number,
    ) => roundsOf(of, count, (target) => measureTarget(target, world.redisUrl, load, loadConnections, loadSeconds));
    log(`measuring: ${connections} connections, ${rounds} alternating rounds of ${seconds} s per target`);
    const byRound = await alternatingRounds(targets, rounds, connections, seconds);
    const medians = mediansOf(targets, byRound);
    const byName = (name: string) => medians.find((m) => m.name === name)!;
    const [bareFigures, check, unmeteredFigures, noRoundTrip, list, ofrep] = targets
      .slice(0, 6)
      .map((t) => byName(t.name)) as [
      TargetFigures,
      TargetFigures,
      TargetFigures,
      TargetFigures,
      TargetFigures,
      TargetFigures,
    ];
    const controlIndex = targets.findIndex((t) => t.name === CONTROL);
    // Ratios of medians, and the median of each round's own ratio (both in the same run).
    const roundRatio = (pick: (round: TargetFigures[]) => number) => median(byRound.map(pick));
    const floorIndex = targets.findIndex((t) => t.name === FLOOR);
    const compiledIndex = targets.findIndex((t) => t.name === COMPILED);
    const controlCpuRatios = byRound.map((r) => totalCpu(r[controlIndex]!) / totalCpu(r[0]!));
    const ratios = {
      checkThroughputVsBare: check.rps / bareFigures.rps,
      checkThroughputVsBareRoundMedian: roundRatio((r) => r[1]!.rps / r[0]!.rps),
      checkP99VsBare: check.p99 / bareFigures.p99,
      checkCpuVsBare: totalCpu(check) / totalCpu(bareFigures),
      checkCpuVsBareRoundMedian: roundRatio((r) => totalCpu(r[1]!) / totalCpu(r[0]!)),
      meteringThroughputCost: check.rps / unmeteredFigures.rps,
      meteringCpuCost: totalCpu(check) / totalCpu(unmeteredFigures),
      listThroughputVsCheck: list.rps / check.rps,
      ofrepThroughputVsCheck: ofrep.rps / check.rps,
      ofrepP99VsCheck: ofrep.p99 / check.p99,
      noRoundTripThroughputVsBare: noRoundTrip.rps / bareFigures.rps,
      noRoundTripCpuVsBare: totalCpu(noRoundTrip) / totalCpu(bareFigures),
      controlThroughputVsBare: roundRatio((r) => r[controlIndex]!.rps / r[0]!.rps),
      controlCpuVsBare: median(controlCpuRatios),
      controlCpuRoundSpread: Math.max(...controlCpuRatios.map((ratio) => Math.max(ratio, 1 / ratio) - 1)),
      floorThroughputVsBare: roundRatio((r) => r[floorIndex]!.rps / r[0]!.rps),
      floorCpuVsBare: roundRatio((r) => totalCpu(r[floorIndex]!) / totalCpu(r[0]!)),
      floorP99VsBare: roundRatio((r) => r[floorIndex]!.p99 / r[0]!.p99),
      compiledThroughputVsTsx: roundRatio((r) => r[compiledIndex]!.rps / r[1]!.rps),
      compiledCpuVsTsx: roundRatio((r) => totalCpu(r[compiledIndex]!) / totalCpu(r[1]!)),
      compiledP99VsTsx: roundRatio((r) => r[compiledIndex]!.p99 / r[1]!.p99),
    };
    const byConnections: ConcurrencyFigures[] = [];
    for (const sweepConnections of connectionSweep(connections)) {
      const sweepRounds = Math.max(3, Math.ceil(rounds / 2));
      log(
        `check and bare at ${sweepConnections} connections: ${sweepRounds} alternating rounds of ${Math.ceil(seconds / 2)} s`,
      );
      const pair = targets.slice(0, 2);
      const sweep = await alternatingRounds(pair, sweepRounds, sweepConnections, Math.ceil(seconds / 2));
      byConnections.push({
        connections: sweepConnections,
        rounds: sweepRounds,
        bare: summarize(
          pair[0]!.name,
          sweep.map((r) => r[0]!),
        ),
        check: summarize(
          pair[1]!.name,
          sweep.map((r) => r[1]!),
        ),
        throughputRatio: median(sweep.map((r) => r[1]!.rps / r[0]!.rps)),
        cpuRatio: median(sweep.map((r) => totalCpu(r[1]!) / totalCpu(r[0]!))),
      });
    }
    log('the SDK: warm-cache check against a raw HTTP check, from this process');
    const sdk = await sdkFigures(
      world,
      url(gatewayPort),
      `http://127.0.0.1:${metricsPort}`,
      Math.min(seconds, 5),
    );
    const result: ThroughputResult = {
      mode: 'throughput',
      date: new Date().toISOString(),
      settings: { seconds, rounds, connections, ...shape },
      targets: medians,
      rounds: byRound,
      ratios,
      byConnections,
      sdk,
      gatewayHeapBytes: await metric(`http://127.0.0.1:${metricsPort}`, 'nodejs_heap_size_used_bytes'),
    };
    return result;
  } finally {
    await world.cleanup();
  }
}

const us = (value: number) => `${value.toFixed(0)} µs`;
const fmt = (value: number) => Math.round(value).toLocaleString('en-US');

function renderConcurrency(byConnections: ConcurrencyFigures[] | undefined): string[] {
  if (!byConnections?.length) return [];
  const cpu = (f: TargetFigures) =>
    `${us(f.serverCpuUs)}${f.redisCpuUs >= 0.5 ? ` + ${us(f.redisCpuUs)} Redis` : ''}`;
  return [
    'The same pair at other numbers of connections (medians of alternating rounds of half the length):',
    '',
    '| connections | bare req/s | check req/s | throughput ratio | bare p99 | check p99 | bare CPU | check CPU | CPU ratio | evals per metering call |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...byConnections.map(
      (c) =>
        `| ${c.connections} | ${fmt(c.bare.rps)} | ${fmt(c.check.rps)} | ${c.throughputRatio.toFixed(2)} | ` +
        `${c.bare.p99.toFixed(1)} ms | ${c.check.p99.toFixed(1)} ms | ${cpu(c.bare)} | ${cpu(c.check)} | ${c.cpuRatio.toFixed(2)}× | ${c.check.evalsPerCall.toFixed(0)} |`,
    ),
    '',
  ];
}

/** Where the check's extra CPU is spent: the server's own user-space code, or the kernel's work for it. */
function renderCpuSplit(result: ThroughputResult): string[] {
  const [bare, check] = result.targets;
  if (bare?.serverUserUs === undefined || bare.serverSystemUs === undefined) return [];
  if (check?.serverUserUs === undefined || check.serverSystemUs === undefined) return [];
  const part = (label: string, b: number, c: number) =>
    `${label} ${c.toFixed(1)} against ${b.toFixed(1)} µs (${(c / b).toFixed(2)}×)`;
  return [
    `The server's CPU per request split (medians): ${part('user space', bare.serverUserUs, check.serverUserUs)}, ` +
      `${part('kernel', bare.serverSystemUs, check.serverSystemUs)}, the check against the bare route.`,
    '',
  ];
}

/** The A/A control's paragraph: how far apart two identical processes measure in this run. */
function renderControl(result: ThroughputResult): string[] {
  const r = result.ratios;
  const [bare, control] = [result.targets[0], result.targets.find((t) => t.name === CONTROL)];
  if (
    r.controlThroughputVsBare === undefined ||
    r.controlCpuVsBare === undefined ||
    r.controlCpuRoundSpread === undefined ||
    !bare ||
    !control
  )
    return [];
  return [
    `Control (A/A): a second bare Fastify process, measured in the same rounds, does ${(control.rps / bare.rps).toFixed(2)} ` +
      `of the first's throughput at ${(totalCpu(control) / totalCpu(bare)).toFixed(2)}× its CPU (ratios of medians; medians of ` +
      `per-round ratios ${r.controlThroughputVsBare.toFixed(2)} and ${r.controlCpuVsBare.toFixed(2)}×); in single rounds the ` +
      `two differ in CPU per request by up to ${(r.controlCpuRoundSpread * 100).toFixed(0)}%. Two identical servers ` +
      `measuring that far apart is the noise any ratio above carries.`,
    '',
  ];
}

/**
 * The floor's paragraph: what the round trip DESIGN.md §2.2 requires costs on its own, against issue 14's
 * budget (the check within 0.85 of the bare route's throughput and 1.25× its CPU).
 */
function renderFloor(result: ThroughputResult): string[] {
  const r = result.ratios;
  if (
    r.floorThroughputVsBare === undefined ||
    r.floorCpuVsBare === undefined ||
    r.floorP99VsBare === undefined
  ) {
    return [];
  }
  return [
    `The floor under any gateway this design allows: the bare route plus only the Redis round trip every eval must make ` +
      `(DESIGN.md §2.2; the gateway's own batcher and client, a script that adds the batch to a counter, no auth, cache, ` +
      `resolution, burst, block or headers) does ${r.floorThroughputVsBare.toFixed(2)} of the bare route's throughput at ` +
      `${r.floorCpuVsBare.toFixed(2)}× its CPU and ${r.floorP99VsBare.toFixed(2)}× its p99 (medians of per-round ratios). ` +
      `The round trip alone adds ${(r.floorCpuVsBare - 1).toFixed(2)}× the bare route's CPU, against the 0.25× that a ` +
      `target of 1.25× leaves for everything the gateway does beyond the bare route.`,
    '',
  ];
}

/** The production build's paragraph: the compiled gateway against the tsx one, measured in the same rounds. */
function renderCompiled(result: ThroughputResult): string[] {
  const r = result.ratios;
  if (
    r.compiledThroughputVsTsx === undefined ||
    r.compiledCpuVsTsx === undefined ||
    r.compiledP99VsTsx === undefined
  )
    return [];
  return [
    `The production build (\`npm run build\`: \`node --enable-source-maps dist/gateway.js\`, as the image runs it) ` +
      `against the same gateway through tsx (\`npm start\`), both measured in the same rounds: ` +
      `**${r.compiledThroughputVsTsx.toFixed(2)}** of its throughput at **${r.compiledCpuVsTsx.toFixed(2)}×** its CPU ` +
      `per request and ${r.compiledP99VsTsx.toFixed(2)}× its p99 (medians of per-round ratios).`,
    '',
  ];
}

export function renderThroughput(result: ThroughputResult): string {
  const { settings: s, ratios: r } = result;
  const rows = result.targets.map(
    (t) =>
      `| ${t.name} | ${fmt(t.rps)} | ${t.p50.toFixed(1)} ms | ${t.p99.toFixed(1)} ms | ${us(t.serverCpuUs)}` +
      `${t.redisCpuUs >= 0.5 ? ` + ${us(t.redisCpuUs)} Redis` : ''} | ${t.non2xx} |`,
  );
  const sdkRows = result.sdk.map(
    (f) =>
      `| ${f.name} | ${fmt(f.opsPerSecond)} | ${us(f.p50Us)} | ${us(f.p99Us)} | ${fmt(f.requestsSent)} |`,
  );
  return [
    `Medians of ${s.rounds} alternating rounds of ${s.seconds} s, ${s.connections} connections, ${fmt(s.subscribers)} ` +
      `subscribers (${s.features} features, ${s.plans} plans, 10% with overrides), ${result.date.slice(0, 10)}:`,
    '',
    '| target | req/s | p50 | p99 | CPU per request | non-2xx |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    `Same-run ratios: warm metered check / bare route throughput **${r.checkThroughputVsBare.toFixed(2)}** ` +
      `(median of per-round ratios ${r.checkThroughputVsBareRoundMedian.toFixed(2)}), p99 **${r.checkP99VsBare.toFixed(2)}×**, ` +
      `CPU per request (gateway + Redis) **${r.checkCpuVsBare.toFixed(2)}×**` +
      `${r.checkCpuVsBareRoundMedian === undefined ? '' : ` (per-round median ${r.checkCpuVsBareRoundMedian.toFixed(2)}×)`}; metering costs ` +
      `${((1 - r.meteringThroughputCost) * 100).toFixed(0)}% of throughput and ${((r.meteringCpuCost - 1) * 100).toFixed(0)}% CPU; ` +
      `list with all=true does ${r.listThroughputVsCheck.toFixed(2)} of the check's throughput; OFREP single-flag ` +
      `evaluation ${r.ofrepThroughputVsCheck.toFixed(2)} of it, at ${r.ofrepP99VsCheck.toFixed(2)}× its p99.` +
      (r.noRoundTripThroughputVsBare === undefined || r.noRoundTripCpuVsBare === undefined
        ? ''
        : ` With no Redis round trip at all (versions from memory, no metering) the gateway does ` +
          `${r.noRoundTripThroughputVsBare.toFixed(2)} of the bare route's throughput at ${r.noRoundTripCpuVsBare.toFixed(2)}× its CPU.`),
    '',
    ...renderCpuSplit(result),
    ...renderFloor(result),
    ...renderCompiled(result),
    ...renderControl(result),
    ...renderConcurrency(result.byConnections),
    'The SDK (`EvalClient.check`, 1,000 subscribers cached, TTL 10 min) against the same check sent over HTTP with an',
    'undici pool, 64 concurrent callers in the bench process each:',
    '',
    '| call | calls/s | p50 | p99 | HTTP requests sent |',
    '|---|---|---|---|---|',
    ...sdkRows,
  ].join('\n');
}
