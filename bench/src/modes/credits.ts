/**
 * `npm run bench -- credits`: a consume of 1 when the subscriber holds five live credits (DESIGN.md §5, "Credits")
 * against a consume when it holds none, in alternating rounds of one run (as the metering mode). Two cases with
 * credits: the allowance is left (the credits are read and ordered, not spent) and the allowance is 0 (every
 * consume spends a credit: one more hash field written and one more dirty-set member). Target (issue 35): each at
 * least 0.9 of the consume without credits. An A/A control (the consume without credits measured twice) gives the
 * noise. Afterwards, exactness from Redis: with an allowance of 0 the credits spent add up to the used figure
 * (nothing double-spent, nothing uncovered), the credits of the feature with allowance left gave nothing, and the
 * used figures match the consumes answered 2xx up to those cut off in flight at the end of each round.
 * A private Redis (its CPU is charged to the targets), the worker running as deployed.
 */
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { redisKeys } from '@ent/common/redis/keys';
import {
  backendCpuSeconds,
  createWorld,
  envNumber,
  freePort,
  healthy,
  log,
  median,
  processCpuSeconds,
  startNode,
  startPrivateRedis,
  type BenchWorld,
} from '../harness.ts';
import { drive } from '../load.ts';
import {
  alternatingRounds,
  measureTarget,
  mediansOf,
  totalCpu,
  type Target,
  type TargetFigures,
} from '../rounds.ts';
import {
  CREDITED_METERED,
  CREDITS_HELD_FEATURE,
  CREDITS_PER_SUBSCRIBER,
  CREDITS_SPENT_FEATURE,
  DEFAULT_SHAPE,
  LARGE_LIMIT,
} from '../seed.ts';
import type { Machine } from '../results.ts';

const CREDIT_AMOUNT = 100_000_000_000; // as bench/src/seed.ts seeds them

export interface CreditsResult {
  mode: 'credits';
  date: string;
  settings: {
    seconds: number;
    rounds: number;
    connections: number;
    subscribers: number;
    creditsPerSubscriber: number;
  };
  loadAverage: { start: number; end: number };
  targets: TargetFigures[];
  rounds: TargetFigures[][];
  /**
   * Per target (medians over the rounds), µs per consume answered: the worker's and the Postgres backends' CPU from
   * the start of the target's drive to a second after it (the worker persists what a round changed within that).
   */
  persisting: { name: string; workerCpuUs: number; postgresCpuUs: number }[];
  /** Medians of per-round ratios against the consume without credits. */
  ratios: {
    heldThroughput: number;
    heldCpu: number;
    spentThroughput: number;
    spentCpu: number;
    controlThroughput: number;
    controlCpu: number;
  };
  exactness: {
    spentConsumes2xx: number;
    spentUsedInRedis: number;
    creditsSpentInRedis: number;
    heldConsumes2xx: number;
    heldUsedInRedis: number;
    heldCreditsSpentInRedis: number;
  };
  /** What writeResult adds: the machine the run was on (absent from results written before it). */
  machine?: Machine;
}

const NONE = 'consume 1, no credits';
const HELD = 'consume 1, five credits, allowance left';
const SPENT = 'consume 1, five credits spent';
const CONTROL = 'consume 1, no credits (A/A control)';

/** The sum over the organization's hashes matching `pattern` of the fields `pick` chooses. */
async function sumInRedis(
  world: BenchWorld,
  pattern: string,
  read: (redis: Redis, key: string) => Promise<number>,
): Promise<number> {
  const redis = new Redis(world.redisUrl);
  try {
    let total = 0;
    for await (const keys of redis.scanStream({ match: pattern, count: 1000 }) as AsyncIterable<string[]>)
      for (const key of keys) total += await read(redis, key);
    return total;
  } finally {
    redis.disconnect();
  }
}

const usedOf = (world: BenchWorld, feature: string) =>
  sumInRedis(
    world,
    redisKeys(world.env.REDIS_KEY_PREFIX!).meteredBalance(world.organizationId, `*|${feature}|*`),
    async (redis, key) => Number((await redis.hget(key, 'u')) ?? 0),
  );

const creditsSpentOf = (world: BenchWorld, feature: string) =>
  sumInRedis(
    world,
    redisKeys(world.env.REDIS_KEY_PREFIX!).creditSpent(world.organizationId, '*', feature),
    async (redis, key) => Object.values(await redis.hgetall(key)).reduce((sum, v) => sum + Number(v), 0),
  );

/** A consume of each credited feature answers what the plan says, before anything is measured. */
async function preflight(gatewayUrl: string, apiKey: string): Promise<void> {
  for (const [feature, remaining] of [
    [CREDITS_HELD_FEATURE, LARGE_LIMIT - 1 + CREDITS_PER_SUBSCRIBER * CREDIT_AMOUNT],
    [CREDITS_SPENT_FEATURE, CREDITS_PER_SUBSCRIBER * CREDIT_AMOUNT - 1],
  ] as const) {
    const res = await fetch(`${gatewayUrl}/org/subscribers/sub-0/entitlements/check`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body: JSON.stringify({ feature, consume: 1 }),
    });
    const body = (await res.json()) as { allowed?: unknown; remaining?: unknown; credits?: unknown[] };
    if (
      res.status !== 200 ||
      body.allowed !== true ||
      body.remaining !== remaining ||
      body.credits?.length !== 5
    )
      throw new Error(`a consume of ${feature} answered ${res.status} ${JSON.stringify(body)}`);
  }
}

const ok = (statuses: Record<string, number>) =>
  Object.entries(statuses).reduce((sum, [status, n]) => sum + (status.startsWith('2') ? n : 0), 0);

/**
 * Twelve rounds of 4 s, not five of 10: this machine's speed drifts by up to a third over 10 to 30 s (the load
 * generator's own CPU per request moves with the gateway's), so targets measured close together see the same machine
 * more often. Same time in all; the A/A control read 0.98 and 1.07 in two such runs against 1.05 to 1.28 in four of
 * five rounds of 10 s the same morning (docs/decisions.md).
 */
const DEFAULT_SECONDS = 4;
const DEFAULT_ROUNDS = 12;

export async function runCredits(): Promise<CreditsResult> {
  const seconds = envNumber('BENCH_SECONDS', DEFAULT_SECONDS);
  const rounds = envNumber('BENCH_ROUNDS', DEFAULT_ROUNDS);
  const connections = envNumber('BENCH_CONNECTIONS', 64);
  const startLoad = loadavg()[0]!;
  // Five credits per subscriber and feature are rows in the snapshot build: fewer subscribers than the other modes.
  const shape = {
    ...DEFAULT_SHAPE,
    subscribers: envNumber('BENCH_SUBSCRIBERS', 20_000),
    metered: CREDITED_METERED,
  };
  const world = await createWorld(shape, { redisUrl: await startPrivateRedis() });
  try {
    const gatewayPort = await freePort();
    startNode('admin/src/server.ts', world.env);
    const worker = startNode('admin/src/worker.ts', world.env);
    const gateway = startNode('gateway/src/server.ts', { ...world.env, GATEWAY_PORT: String(gatewayPort) });
    const url = `http://127.0.0.1:${gatewayPort}`;
    await Promise.all([world.adminUrl, url].map((u) => healthy(`${u}/healthz`)));
    await preflight(url, world.apiKey);
    const load = { apiKey: world.apiKey, subscribers: shape.subscribers, features: shape.features };
    const counted = { 'consume-credits-held': 1, 'consume-credits-spent': 1 } as Record<string, number>;
    log(`warming: a consume of each metered feature for each of the ${shape.subscribers} subscribers`);
    for (const route of ['consume', 'consume-credits-held', 'consume-credits-spent'] as const) {
      const warmed = await drive({ ...load, url, connections, route, amount: shape.subscribers });
      counted[route] = (counted[route] ?? 0) + ok(warmed.statuses);
    }

    const targets: Target[] = [
      { name: NONE, port: gatewayPort, pid: gateway.pid, route: 'consume' },
      { name: HELD, port: gatewayPort, pid: gateway.pid, route: 'consume-credits-held' },
      { name: SPENT, port: gatewayPort, pid: gateway.pid, route: 'consume-credits-spent' },
      { name: CONTROL, port: gatewayPort, pid: gateway.pid, route: 'consume' },
    ];
    log(`measuring: ${connections} connections, ${rounds} alternating rounds of ${seconds} s per target`);
    const persistingByName = new Map<string, { workerCpuUs: number; postgresCpuUs: number }[]>();
    const byRound = await alternatingRounds(targets, rounds, async (target) => {
      const workerBefore = processCpuSeconds(worker.pid);
      const postgresBefore = await backendCpuSeconds(world.env.DATABASE_OWNER_URL!);
      const figures = await measureTarget(target, world.redisUrl, load, connections, seconds);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const perConsume = (cpuSeconds: number) => (cpuSeconds / Math.max(1, figures.requests)) * 1e6;
      const rows = persistingByName.get(target.name) ?? [];
      rows.push({
        workerCpuUs: perConsume(processCpuSeconds(worker.pid) - workerBefore),
        postgresCpuUs: perConsume((await backendCpuSeconds(world.env.DATABASE_OWNER_URL!)) - postgresBefore),
      });
      persistingByName.set(target.name, rows);
      return figures;
    });
    for (const round of byRound)
      for (const [i, figures] of round.entries())
        counted[targets[i]!.route] = (counted[targets[i]!.route] ?? 0) + ok(figures.statuses);
    const ratio = (of: number, pick: (f: TargetFigures) => number) =>
      median(byRound.map((r) => pick(r[of]!) / pick(r[0]!)));
    const rps = (f: TargetFigures) => f.rps;
    const exactness = {
      spentConsumes2xx: counted['consume-credits-spent']!,
      spentUsedInRedis: await usedOf(world, CREDITS_SPENT_FEATURE),
      creditsSpentInRedis: await creditsSpentOf(world, CREDITS_SPENT_FEATURE),
      heldConsumes2xx: counted['consume-credits-held']!,
      heldUsedInRedis: await usedOf(world, CREDITS_HELD_FEATURE),
      heldCreditsSpentInRedis: await creditsSpentOf(world, CREDITS_HELD_FEATURE),
    };
    log(`exactness: ${JSON.stringify(exactness)}`);
    return {
      mode: 'credits',
      date: new Date().toISOString(),
      settings: {
        seconds,
        rounds,
        connections,
        subscribers: shape.subscribers,
        creditsPerSubscriber: CREDITS_PER_SUBSCRIBER,
      },
      loadAverage: { start: startLoad, end: loadavg()[0]! },
      targets: mediansOf(targets, byRound),
      rounds: byRound,
      persisting: targets.map(({ name }) => {
        const rows = persistingByName.get(name) ?? [];
        return {
          name,
          workerCpuUs: median(rows.map((row) => row.workerCpuUs)),
          postgresCpuUs: median(rows.map((row) => row.postgresCpuUs)),
        };
      }),
      ratios: {
        heldThroughput: ratio(1, rps),
        heldCpu: ratio(1, totalCpu),
        spentThroughput: ratio(2, rps),
        spentCpu: ratio(2, totalCpu),
        controlThroughput: ratio(3, rps),
        controlCpu: ratio(3, totalCpu),
      },
      exactness,
    };
  } finally {
    await world.cleanup();
  }
}

/** The commands a consume's Redis time goes to: the scripts, and what they run inside (HGETALL: the drain's hashes). */
const REDIS_COMMANDS = ['evalsha', 'hmget', 'hset', 'hgetall', 'exists', 'sadd', 'spop'] as const;

const us = (value: number) => `${value.toFixed(0)} µs`;
const fmt = (value: number) => Math.round(value).toLocaleString('en-US');
const meets = (holds: boolean) => (holds ? 'met' : 'NOT met');

export function renderCredits(result: CreditsResult): string {
  const { settings: s, ratios: r, exactness: e } = result;
  const cores = result.machine?.cpus;
  const rows = result.targets.map((t, i) => {
    const persisting = result.persisting?.[i];
    const background = persisting
      ? `${us(persisting.workerCpuUs)} + ${us(persisting.postgresCpuUs)}`
      : 'not measured';
    // The whole machine: what a saturated box's throughput divides, and the share of it the load generator took.
    const machine =
      t.machineBusyUs && cores
        ? `${us(t.machineBusyUs)} (load generator ${us(t.loadGeneratorUs ?? 0)}), ` +
          `${Math.round(((t.machineBusyUs * t.rps) / (cores * 1e6)) * 100)} % busy`
        : 'not measured';
    return (
      `| ${t.name} | ${fmt(t.rps)} | ${t.p50.toFixed(1)} ms | ${t.p99.toFixed(1)} ms | ${us(t.serverCpuUs)} + ` +
      `${us(t.redisCpuUs)} Redis | ${background} | ${machine} | ${t.non2xx} |`
    );
  });
  // Where Redis's time per request went, by command (absent from results written before it was measured).
  const byCommand = result.targets.some((t) => Object.keys(t.redisCommandUs ?? {}).length > 0)
    ? [
        '',
        "Redis per request by command (INFO commandstats, medians; a script's time includes the commands it runs, and " +
          "EVALSHA is both the gateway's gate call and the worker's drain):",
        '',
        `| target | ${REDIS_COMMANDS.map((c) => c.toUpperCase()).join(' | ')} | all Redis |`,
        `|---|${REDIS_COMMANDS.map(() => '---|').join('')}---|`,
        ...result.targets.map(
          (t) =>
            `| ${t.name} | ${REDIS_COMMANDS.map((c) => (t.redisCommandUs?.[c] ?? 0).toFixed(1)).join(' | ')} | ` +
            `${t.redisCpuUs.toFixed(1)} |`,
        ),
      ]
    : [];
  return [
    `Medians of ${s.rounds} alternating rounds of ${s.seconds} s, ${s.connections} connections, ${fmt(s.subscribers)} ` +
      `subscribers each holding ${s.creditsPerSubscriber} live credits on two metered features (mixed priorities ` +
      `and expiries; one with a limit of 10^12, one with a limit of 0), a private Redis, the worker running, ` +
      `${result.date.slice(0, 10)}; load average ${result.loadAverage.start.toFixed(1)} at the start, ` +
      `${result.loadAverage.end.toFixed(1)} at the end (${cores ?? 2} cores):`,
    '',
    '| target | req/s | p50 | p99 | CPU per request | worker + Postgres per request | whole machine per request | non-2xx |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
    ...byCommand,
    '',
    `Same-run ratios against the consume without credits (medians of per-round ratios): with five credits and the ` +
      `allowance left **${r.heldThroughput.toFixed(2)}** of its throughput at ${r.heldCpu.toFixed(2)}× its CPU per ` +
      `request; spending a credit **${r.spentThroughput.toFixed(2)}** at ${r.spentCpu.toFixed(2)}× (target at least ` +
      `0.9: ${meets(r.heldThroughput >= 0.9 && r.spentThroughput >= 0.9)}); the A/A control ` +
      `${r.controlThroughput.toFixed(2)} at ${r.controlCpu.toFixed(2)}× (the noise any ratio here carries). ` +
      `Exactness, from Redis: with an allowance of 0, used ${fmt(e.spentUsedInRedis)} and ` +
      `${fmt(e.creditsSpentInRedis)} spent from credits (double-spent ${e.creditsSpentInRedis - e.spentUsedInRedis}, ` +
      `uncovered ${Math.max(0, e.spentUsedInRedis - e.creditsSpentInRedis)}); with the allowance left, used ` +
      `${fmt(e.heldUsedInRedis)} and ${fmt(e.heldCreditsSpentInRedis)} spent from credits. Consumes answered 2xx: ` +
      `${fmt(e.spentConsumes2xx)} and ${fmt(e.heldConsumes2xx)} (used minus these: ` +
      `${e.spentUsedInRedis - e.spentConsumes2xx} and ${e.heldUsedInRedis - e.heldConsumes2xx}; up to ` +
      `${s.connections * s.rounds}, the connections times the rounds, are consumes cut off in flight at the end of a ` +
      `round: applied, never answered).`,
  ].join('\n');
}
