/**
 * Targets measured in alternating rounds of one run (throughput and metering modes): each target is driven in turn,
 * its server's and Redis's CPU charged to the requests it answered, every other round in reverse order.
 */
import { driveMeasured, log, median, redisScriptCalls, type MeasuredFigures } from './harness.ts';
import type { LoadOptions, RouteKind } from './load.ts';

export interface TargetFigures extends MeasuredFigures {
  name: string;
  /** Evals per Redis script call (0 when the target calls no script). */
  evalsPerCall: number;
}

export interface Target {
  name: string;
  port: number;
  pid: number;
  route: RouteKind;
}

/** CPU per request charged to a target: its server's and Redis's. */
export const totalCpu = (f: TargetFigures) => f.serverCpuUs + f.redisCpuUs;

const sum = (figures: TargetFigures[], pick: (f: TargetFigures) => number) =>
  figures.reduce((s, f) => s + pick(f), 0);

/** One target's figures over the rounds: medians of the rates, latencies and CPU; totals of the counts. */
export function summarize(name: string, runs: TargetFigures[]): TargetFigures {
  const statuses: Record<string, number> = {};
  for (const run of runs)
    for (const [status, n] of Object.entries(run.statuses)) statuses[status] = (statuses[status] ?? 0) + n;
  return {
    name,
    rps: median(runs.map((r) => r.rps)),
    p50: median(runs.map((r) => r.p50)),
    p95: median(runs.map((r) => r.p95)),
    p99: median(runs.map((r) => r.p99)),
    requests: sum(runs, (r) => r.requests),
    non2xx: sum(runs, (r) => r.non2xx),
    errors: sum(runs, (r) => r.errors),
    statuses,
    serverCpuUs: median(runs.map((r) => r.serverCpuUs)),
    serverUserUs: median(runs.map((r) => r.serverUserUs ?? 0)),
    serverSystemUs: median(runs.map((r) => r.serverSystemUs ?? 0)),
    redisCpuUs: median(runs.map((r) => r.redisCpuUs)),
    machineBusyUs: median(runs.map((r) => r.machineBusyUs ?? 0)),
    loadGeneratorUs: median(runs.map((r) => r.loadGeneratorUs ?? 0)),
    evalsPerCall: median(runs.map((r) => r.evalsPerCall)),
    redisCommandUs: Object.fromEntries(
      [...new Set(runs.flatMap((r) => Object.keys(r.redisCommandUs ?? {})))].map((command) => [
        command,
        median(runs.map((r) => r.redisCommandUs?.[command] ?? 0)),
      ]),
    ),
  };
}

/** What every target of a run shares: the key, the subscribers and features it walks. */
export type SharedLoad = Omit<LoadOptions, 'url' | 'route' | 'connections' | 'seconds' | 'amount'>;

/** One target under load, with the evals it put in each Redis script call. */
export async function measureTarget(
  target: Target,
  redisUrl: string,
  load: SharedLoad,
  connections: number,
  seconds: number,
): Promise<TargetFigures> {
  const callsBefore = redisScriptCalls(redisUrl);
  const measured = await driveMeasured(target.pid, redisUrl, {
    ...load,
    connections,
    url: `http://127.0.0.1:${target.port}`,
    route: target.route,
    seconds,
  });
  const calls = redisScriptCalls(redisUrl) - callsBefore;
  return { name: target.name, ...measured, evalsPerCall: calls > 0 ? measured.requests / calls : 0 };
}

/**
 * Rounds of every target, figures in the targets' order. Every other round runs them in reverse order: a drift
 * of the machine's speed during a round then weighs on the first and the last target alike over the run.
 */
export async function alternatingRounds(
  of: Target[],
  count: number,
  measure: (target: Target) => Promise<TargetFigures>,
): Promise<TargetFigures[][]> {
  const byRound: TargetFigures[][] = [];
  for (let round = 0; round < count; round++) {
    const measuredByName = new Map<string, TargetFigures>();
    for (const target of round % 2 === 0 ? of : [...of].reverse()) {
      measuredByName.set(target.name, await measure(target));
    }
    const figures = of.map((target) => measuredByName.get(target.name)!);
    log(`round ${round + 1}: ${figures.map((f) => `${f.name} ${f.rps.toFixed(0)}/s`).join(', ')}`);
    byRound.push(figures);
  }
  return byRound;
}

/** Each target's medians over the rounds, in the targets' order. */
export const mediansOf = (targets: Target[], byRound: TargetFigures[][]): TargetFigures[] =>
  targets.map((t, i) =>
    summarize(
      t.name,
      byRound.map((r) => r[i]!),
    ),
  );
