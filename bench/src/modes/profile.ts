/**
 * `npm run bench -- profile`: where a warm metered check spends its CPU, next to the bare Fastify route, under
 * the same load. Linux perf samples each server on CPU only (the `cpu-clock` event, kernel included), V8's
 * JIT dumps name the JavaScript frames, and each sample is charged to the nearest JavaScript function's source:
 * a file of ours, a package, or a Node.js module (samples with no JavaScript frame: V8's garbage collector, or
 * native code such as the HTTP parser and the event loop). Figures are microseconds of CPU per request.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createWorld,
  driveMeasured,
  envNumber,
  freePort,
  healthy,
  log,
  startNode,
} from '../harness.ts';
import { drive, type RouteKind } from '../load.ts';
import {
  CREDITED_METERED,
  DEFAULT_SHAPE,
  LARGE_LIMIT,
  METERED_FEATURE,
  type SeedShape,
} from '../seed.ts';

export interface ProfiledTarget {
  name: string;
  rps: number;
  serverCpuUs: number;
  redisCpuUs: number;
  samples: number;
  /** By coarse group (node-and-kernel, fastify, redis-client, ours, gc, other), µs per request. */
  groups: Record<string, number>;
  /** The heaviest sources, µs per request. */
  sources: { source: string; us: number }[];
}

export interface ProfileResult {
  mode: 'profile';
  date: string;
  settings: { seconds: number; connections: number; subscribers: number; features: number };
  targets: ProfiledTarget[];
}

const GROUPS = ['node-and-kernel', 'fastify', 'redis-client', 'ours', 'gc', 'other'] as const;
const FASTIFY = /^pkg:(fastify|find-my-way|secure-json-parse|avvio|@fastify\/.*|fast-json-stringify|light-my-request|abstract-logging|toad-cache|fast-querystring|content-type)$/;
const REDIS_CLIENT = /^pkg:(ioredis|redis-parser|standard-as-callback|denque|cluster-key-slot|redis-errors)$/;

/** The source a sample is charged to: its nearest JavaScript frame's file or package, or what native code it is. */
export function sourceOf(stack: readonly string[]): string {
  for (const symbol of stack) {
    if (!symbol.startsWith('JS:')) continue;
    const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(symbol);
    if (pkg) return `pkg:${pkg[1]}`;
    const ours = /((?:gateway|common|admin|bench|sdk)\/src\/[^:\s]+)/.exec(symbol);
    if (ours) return ours[1]!;
    const nodeModule = /node:([\w/]+)/.exec(symbol);
    if (nodeModule) return `node:${nodeModule[1]}`;
    return 'js:other';
  }
  return stack.some((symbol) => /Scaveng|MarkCompact|Heap::|Sweep|Marking|GCTracer/.test(symbol)) ? 'v8:gc' : 'native';
}

export function groupOf(source: string): (typeof GROUPS)[number] {
  if (source === 'v8:gc') return 'gc';
  if (source === 'native' || source.startsWith('node:')) return 'node-and-kernel';
  if (FASTIFY.test(source)) return 'fastify';
  if (REDIS_CLIENT.test(source)) return 'redis-client';
  if (/^(gateway|common|admin|bench|sdk)\//.test(source)) return 'ours';
  return 'other';
}

/** Stacks (leaf first) from `perf script -F ip,sym`: one frame per line, a blank line between samples. */
export function* stacksOf(script: string): Generator<string[]> {
  let stack: string[] = [];
  for (const line of script.split('\n')) {
    const trimmed = line.trim();
    if (trimmed === '') {
      if (stack.length) yield stack;
      stack = [];
      continue;
    }
    const space = trimmed.indexOf(' ');
    stack.push(space < 0 ? '?' : trimmed.slice(space + 1));
  }
  if (stack.length) yield stack;
}

function breakdown(dataFile: string, cpuUsPerRequest: number) {
  const injected = `${dataFile}.jit`;
  const inject = spawnSync('perf', ['inject', '--jit', '-i', dataFile, '-o', injected], { encoding: 'utf8' });
  if (inject.status !== 0) throw new Error(`perf inject failed: ${inject.stderr}`);
  const script = spawnSync('perf', ['script', '-i', injected, '-F', 'ip,sym'], { encoding: 'utf8', maxBuffer: 1 << 30 });
  if (script.status !== 0) throw new Error(`perf script failed: ${script.stderr}`);
  const bySource = new Map<string, number>();
  let samples = 0;
  for (const stack of stacksOf(script.stdout)) {
    samples += 1;
    const source = sourceOf(stack);
    bySource.set(source, (bySource.get(source) ?? 0) + 1);
  }
  const us = (count: number) => (count / Math.max(1, samples)) * cpuUsPerRequest;
  const groups = Object.fromEntries(GROUPS.map((group) => [group, 0])) as Record<string, number>;
  for (const [source, count] of bySource) groups[groupOf(source)]! += us(count);
  const sources = [...bySource]
    .map(([source, count]) => ({ source, us: us(count) }))
    .sort((a, b) => b.us - a.us);
  return { samples, groups, sources };
}

/**
 * Runs of one target, of equal duration, as one: the mean of each figure over the runs (equal weights, so that a
 * steady drift of the machine's speed cancels between the two orders), the heaviest 25 sources kept.
 */
export function combine(segments: ProfiledTarget[]): ProfiledTarget {
  const mean = (pick: (s: ProfiledTarget) => number) => segments.reduce((sum, s) => sum + pick(s), 0) / segments.length;
  const names = (pick: (s: ProfiledTarget) => Record<string, number>) => [...new Set(segments.flatMap((s) => Object.keys(pick(s))))];
  const groups = Object.fromEntries(names((s) => s.groups).map((group) => [group, mean((s) => s.groups[group] ?? 0)]));
  const bySource = (s: ProfiledTarget) => Object.fromEntries(s.sources.map((entry) => [entry.source, entry.us]));
  const sources = names(bySource)
    .map((source) => ({ source, us: mean((s) => bySource(s)[source] ?? 0) }))
    .sort((a, b) => b.us - a.us)
    .slice(0, 25);
  return {
    name: segments[0]!.name,
    rps: mean((s) => s.rps),
    serverCpuUs: mean((s) => s.serverCpuUs),
    redisCpuUs: mean((s) => s.redisCpuUs),
    samples: segments.reduce((sum, s) => sum + s.samples, 0),
    groups,
    sources,
  };
}

interface ProfileTarget {
  name: string;
  /** The bare route's server, or the gateway's. */
  server: 'bare' | 'gateway';
  route: RouteKind;
}

const CHECK_AGAINST_BARE: readonly [ProfileTarget, ProfileTarget] = [
  { name: 'bare fastify', server: 'bare', route: 'check' },
  { name: 'gateway check', server: 'gateway', route: 'check' },
];
const CONSUME_AGAINST_CHECK: readonly [ProfileTarget, ProfileTarget] = [
  { name: 'gateway check', server: 'gateway', route: 'check' },
  { name: 'gateway consume 1', server: 'gateway', route: 'consume' },
];

const CREDITS_AGAINST_CONSUME = (route: 'consume-credits-held' | 'consume-credits-spent') =>
  [
    { name: 'gateway consume 1', server: 'gateway', route: 'consume' },
    {
      name: route === 'consume-credits-held' ? 'consume, five credits held' : 'consume, a credit spent',
      server: 'gateway',
      route,
    },
  ] as const;

const METERED_ONLY: NonNullable<SeedShape['metered']> = [{ key: METERED_FEATURE, limits: [LARGE_LIMIT] }];

/** `npm run bench -- profile`: the gateway's check against the bare route. */
export const runProfile = () => profile(CHECK_AGAINST_BARE);
/** `npm run bench -- profile-consume`: a consume of 1 against the plain check, on the same gateway (issue 34). */
export const runConsumeProfile = () => profile(CONSUME_AGAINST_CHECK);
/**
 * `npm run bench -- profile-credits`: a consume of 1 holding five live credits against one holding none, on the same
 * gateway (issue 35); BENCH_PROFILE_CREDITS=spent: each consume spends a credit (an allowance of 0).
 */
export const runCreditsProfile = () =>
  profile(
    CREDITS_AGAINST_CONSUME(
      process.env.BENCH_PROFILE_CREDITS === 'spent' ? 'consume-credits-spent' : 'consume-credits-held',
    ),
    CREDITED_METERED,
  );

async function profile(
  [baseline, subject]: readonly [ProfileTarget, ProfileTarget],
  metered: SeedShape['metered'] = METERED_ONLY,
): Promise<ProfileResult> {
  if (spawnSync('perf', ['--version']).status !== 0) {
    throw new Error("perf is missing: install Debian's linux-perf (apt-get install -y linux-perf)");
  }
  const seconds = envNumber('BENCH_SECONDS', 10);
  const connections = envNumber('BENCH_CONNECTIONS', 64);
  const shape = {
    ...DEFAULT_SHAPE,
    subscribers: envNumber('BENCH_SUBSCRIBERS', 20_000),
    metered,
  };
  // The servers run from a scratch directory: V8 writes its JIT dumps (and perf its injected objects) there.
  const scratch = mkdtempSync(join(tmpdir(), 'ent-profile-'));
  const world = await createWorld(shape);
  try {
    const [gatewayPort, barePort] = [await freePort(), await freePort()];
    const profiled = { nodeArgs: ['--perf-prof', '--interpreted-frames-native-stack'], cwd: scratch };
    startNode('admin/src/server.ts', world.env);
    const gateway = startNode('gateway/src/server.ts', { ...world.env, GATEWAY_PORT: String(gatewayPort) }, profiled);
    const bare = startNode('bench/src/bare-server.ts', { ...world.env, BARE_PORT: String(barePort) }, profiled);
    const url = (port: number) => `http://127.0.0.1:${port}`;
    await Promise.all([world.adminUrl, url(gatewayPort), url(barePort)].map((u) => healthy(`${u}/healthz`)));
    const load = { apiKey: world.apiKey, subscribers: shape.subscribers, features: shape.features, connections };
    log(`warming: every subscriber three times on the gateway with each route, ${seconds} s on the bare route`);
    for (const route of new Set([baseline.route, subject.route]))
      await drive({ ...load, route, url: url(gatewayPort), amount: shape.subscribers * 3 });
    await drive({ ...load, route: 'check', url: url(barePort), seconds });

    // Each target is profiled twice, in the order bare, gateway, gateway, bare, half the time each: on a shared
    // machine whose speed drifts, a drift that is steady over the run weighs on both targets alike.
    const servers = { bare: { pid: bare.pid, port: barePort }, gateway: { pid: gateway.pid, port: gatewayPort } };
    const segments: ProfiledTarget[] = [];
    for (const target of [baseline, subject, subject, baseline]) {
      const { name, route } = target;
      const { pid, port } = servers[target.server];
      const dataFile = join(scratch, `${pid}-${segments.length}.perf`);
      const perf = spawn('perf', ['record', '--no-buildid-cache', '-k', 'mono', '-e', 'cpu-clock', '-F', '1999', '-g', '-p', String(pid), '-o', dataFile], {
        stdio: 'ignore',
      });
      await new Promise((resolve) => setTimeout(resolve, 500));
      const measured = await driveMeasured(pid, world.redisUrl, { ...load, route, url: url(port), seconds: seconds / 2 });
      const { serverCpuUs, redisCpuUs } = measured;
      const stopped = new Promise((resolve) => perf.once('exit', resolve));
      perf.kill('SIGINT');
      await stopped;
      const { samples, groups, sources } = breakdown(dataFile, serverCpuUs);
      log(`${name}: ${measured.rps.toFixed(0)}/s, ${serverCpuUs.toFixed(1)} µs CPU per request (+ ${redisCpuUs.toFixed(1)} Redis), ${samples} samples`);
      segments.push({ name, rps: measured.rps, serverCpuUs, redisCpuUs, samples, groups, sources });
    }
    const targets = [baseline, subject].map(({ name }) => combine(segments.filter((s) => s.name === name)));
    return {
      mode: 'profile',
      date: new Date().toISOString(),
      settings: { seconds, connections, subscribers: shape.subscribers, features: shape.features },
      targets,
    };
  } finally {
    await world.cleanup();
    rmSync(scratch, { recursive: true, force: true });
  }
}

const GROUP_NAMES: Record<(typeof GROUPS)[number], string> = {
  'node-and-kernel': 'Node.js http, streams, event loop and the kernel',
  fastify: 'Fastify (routing, hooks, body parsing, validation, reply)',
  'redis-client': 'Redis client (ioredis)',
  ours: 'our code (auth, gate batcher, LRU, answers, metrics)',
  gc: 'V8 garbage collection',
  other: 'other packages',
};

export function renderProfile(result: ProfileResult): string {
  const [bare, gateway] = result.targets as [ProfiledTarget, ProfiledTarget];
  const label = ({ name }: ProfiledTarget) => (name === 'bare fastify' ? 'bare route' : name);
  const columns = `| where | ${label(bare)} | ${label(gateway)} | difference |`;
  const us = (value: number) => value.toFixed(1);
  const rows = GROUPS.map(
    (group) =>
      `| ${GROUP_NAMES[group]} | ${us(bare.groups[group] ?? 0)} | ${us(gateway.groups[group] ?? 0)} | ${us((gateway.groups[group] ?? 0) - (bare.groups[group] ?? 0))} |`,
  );
  return [
    `On-CPU profile (\`npm run bench -- profile\`, perf \`cpu-clock\`, ${result.settings.connections} connections, each target ` +
      `${result.settings.seconds} s in two runs in the order bare, gateway, gateway, bare, ${result.date.slice(0, 10)}), ` +
      'µs of server CPU per request:',
    '',
    columns,
    '|---|---|---|---|',
    ...rows,
    `| **server total** | **${us(bare.serverCpuUs)}** | **${us(gateway.serverCpuUs)}** | **${us(gateway.serverCpuUs - bare.serverCpuUs)}** |`,
    `| Redis (its own process) | ${us(bare.redisCpuUs)} | ${us(gateway.redisCpuUs)} | ${us(gateway.redisCpuUs - bare.redisCpuUs)} |`,
  ].join('\n');
}
