/**
 * `npm run bench -- aging`: does a gateway that has served a long, mixed history answer as cheaply as a fresh one?
 *
 * One gateway is aged first: many small organizations (each with its own key and catalog, evaluated a few times),
 * a soak (evals at a bounded rate over 1,000 subscribers of one organization while an override is written through
 * the gateway every second), a large cache (one eval for each subscriber of another organization), its warm-up on the
 * measured organization (1,000 subscribers neither gateway has seen before) and a quiet spell. Two more gateways are
 * started fresh after that and warmed the same way: the reference ("fresh") and an A/A control, a second fresh gateway
 * whose ratio to the reference is what two identical processes differ by on this machine. The three are measured in
 * the same rounds, each round in another of their six orders, so no gateway always runs first and the machine's
 * drift weighs on all alike. Reported: the aged gateway's and the control's throughput and CPU per request against
 * the reference's (per round, medians and their spread), each one's heap and GC work, and a verdict: the aged
 * gateway passes at a median of at least 0.97 of the reference for both, and the verdict says whether its ratios lie
 * within the band the control's ratios span (the noise an identical fresh gateway shows).
 *
 * Settings: BENCH_SECONDS (per round, default 10), BENCH_ROUNDS (default 6), BENCH_CONNECTIONS (default 64),
 * BENCH_AGING_ORGS (default 300), BENCH_AGING_SOAK_SECONDS (default 100), BENCH_AGING_SOAK_RATE (evals/s, default
 * 2,500), BENCH_AGING_FILL (subscribers cached, default 12,000), BENCH_AGING_QUIET_SECONDS (the aged gateway's idle
 * spell before the fresh one starts, default 15); BENCH_GATEWAY_WITHOUT_FLAGS=1 runs both gateways without their V8
 * flags (gateway/src/runtime-flags.ts), to see what those change; BENCH_AGING_NODE_ARGS=--trace-gc-nvp with
 * BENCH_CHILD_STDOUT=/tmp/gc keeps each gateway's collections in /tmp/gc.<pid>. A smoke run: BENCH_AGING_ORGS=40
 * BENCH_AGING_SOAK_SECONDS=20 BENCH_AGING_FILL=3000 BENCH_ROUNDS=4 BENCH_SECONDS=4. An A/A run of the whole mode (the
 * "aged" gateway with next to no history): BENCH_AGING_ORGS=1 BENCH_AGING_SOAK_SECONDS=2 BENCH_AGING_FILL=64 (the fill
 * is driven with BENCH_CONNECTIONS connections, so at least that many).
 */
import { availableParallelism, loadavg } from 'node:os';
import { createDb } from '@ent/common/db/connect';
import { GATEWAY_NODE_FLAGS } from '../../../gateway/src/runtime-flags.ts';
import { createOrganization } from '../../../admin/src/features/provisioning/create-organization.ts';
import {
  createWorld,
  driveMeasured,
  envNumber,
  freePort,
  healthy,
  log,
  median,
  metric,
  startNode,
  type MeasuredFigures,
} from '../harness.ts';
import { drive } from '../load.ts';
import { featureKey, seed } from '../seed.ts';

const MEASURED_SHAPE = { features: 20, plans: 5, subscribers: 1000 };

/** What a gateway holds and how hard its collector works, read from its /metrics. */
export interface GatewayState {
  /** After a full collection. */
  heapUsedBytes: number;
  oldSpaceUsedBytes: number;
  cachedSubscribers: number;
}

export interface GatewayFigures extends MeasuredFigures {
  /** Seconds of GC pauses per million requests. */
  gcSecondsPerMillion: number;
  /** Young-generation collections per thousand requests: how often the gateway scavenged for the same work. */
  scavengesPerThousand: number;
  /** The young generation's size at the end of the round. */
  youngGenerationBytes: number;
}

/** The gateway aged first, the fresh reference, and the A/A control (a second fresh gateway). */
export type GatewayName = 'aged' | 'fresh' | 'control';

export interface AgingRound {
  /** The order the three ran in within this round. */
  order: GatewayName[];
  aged: GatewayFigures;
  fresh: GatewayFigures;
  control: GatewayFigures;
}

/** One gateway's ratio to the fresh reference, per round, with its median and spread. */
export interface RatioSeries {
  perRound: number[];
  median: number;
  min: number;
  max: number;
}

/** A gateway against the fresh reference gateway, in the same rounds. */
export interface Comparison {
  /** Its requests per second over the reference's. */
  throughput: RatioSeries;
  /** The reference's CPU per request (gateway and Redis) over its own: below 1, it costs more. */
  cpuEfficiency: RatioSeries;
  /** The same, the gateway process's CPU only. */
  gatewayCpuEfficiency: RatioSeries;
  /** Its scavenges per request over the reference's: above 1, it collects its young generation more often. */
  scavenges: RatioSeries;
}

/** One figure's verdict: the aged gateway's median against the target and against the A/A control's band. */
export interface FigureVerdict {
  agedMedian: number;
  controlMedian: number;
  meetsTarget: boolean;
  /** The range of the control's per-round ratios: what two identical fresh gateways differ by in this run. */
  noiseBand: [number, number];
  /** Where the aged gateway's median lies against that band. */
  againstNoise: 'below' | 'within' | 'above';
  /** Rounds in which the aged gateway did worse against the reference than the control did. */
  roundsWorseThanControl: number;
  /**
   * The control's band lies within the target's margin (from the target to its inverse): only then can this run tell
   * a shortfall of that size from noise. When it is wider, a pass says only that the medians met the target.
   */
  resolvesTarget: boolean;
}

export interface AgingVerdict {
  target: number;
  /** The aged gateway's medians are both at least the target. */
  passed: boolean;
  throughput: FigureVerdict;
  cpuEfficiency: FigureVerdict;
  summary: string;
}

export interface AgingResult {
  mode: 'aging';
  date: string;
  settings: {
    seconds: number;
    rounds: number;
    connections: number;
    organizations: number;
    soakSeconds: number;
    soakRate: number;
    fillSubscribers: number;
    quietSeconds: number;
    measuredSubscribers: number;
    /** The V8 flags every gateway ran with (none: BENCH_GATEWAY_WITHOUT_FLAGS). */
    gatewayFlags: readonly string[];
  };
  aging: {
    seconds: number;
    soakEvals: number;
    soakNon2xx: number;
    overrideWrites: number;
    fillNon2xx: number;
  };
  aged: GatewayState;
  fresh: GatewayState;
  control: GatewayState;
  rounds: AgingRound[];
  /**
   * The machine's 1-minute load average just before the rounds and just after, and its cores: how much else shared
   * the machine (absent from results written before it was recorded).
   */
  machineLoad?: { before: number; after: number; cores: number };
  /** The aged gateway and the control, each against the fresh reference. */
  ratios: { aged: Comparison; control: Comparison };
  verdict: AgingVerdict;
}

/** What the aged gateway must keep of the fresh one's throughput and CPU efficiency per request. */
const AGING_TARGET = 0.97;

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const url = (port: number) => `http://127.0.0.1:${port}`;

interface Gateway {
  name: string;
  pid: number;
  url: string;
  metricsUrl: string;
}

function startGateway(name: string, env: Record<string, string>, port: number, metricsPort: number): Gateway {
  const child = startNode(
    'gateway/src/server.ts',
    { ...env, GATEWAY_PORT: String(port), GATEWAY_METRICS_PORT: String(metricsPort) },
    { nodeArgs: ['--expose-gc', '--import', './bench/src/gc-on-signal.mjs', ...extraNodeArgs()] },
  );
  return { name, pid: child.pid, url: url(port), metricsUrl: url(metricsPort) };
}

/** BENCH_AGING_NODE_ARGS: more V8 flags for both gateways (e.g. --trace-gc while looking into a difference). */
const extraNodeArgs = () => (process.env.BENCH_AGING_NODE_ARGS ?? '').split(' ').filter(Boolean);

async function stateOf(gateway: Gateway): Promise<GatewayState> {
  await pause(500);
  process.kill(gateway.pid, 'SIGUSR2');
  await pause(1500);
  return {
    heapUsedBytes: await metric(gateway.metricsUrl, 'nodejs_heap_size_used_bytes'),
    oldSpaceUsedBytes: await spaceUsed(gateway.metricsUrl, 'old'),
    cachedSubscribers: await metric(gateway.metricsUrl, 'gateway_cache_subscribers'),
  };
}

/** GC pauses so far (seconds), scavenges so far, and the young generation's size now, from /metrics. */
async function gcTotals(metricsUrl: string) {
  const lines = (await (await fetch(`${metricsUrl}/metrics`)).text()).split('\n');
  const value = (prefix: string) =>
    lines.filter((l) => l.startsWith(prefix)).reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
  return {
    seconds: value('nodejs_gc_duration_seconds_sum'),
    scavenges: value('nodejs_gc_duration_seconds_count{kind="minor"}'),
    youngGenerationBytes: value('nodejs_heap_space_size_total_bytes{space="new"}'),
  };
}

async function spaceUsed(metricsUrl: string, space: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`nodejs_heap_space_size_used_bytes{space="${space}"}`));
  return Number(line?.split(' ').at(-1) ?? 0);
}

/** Every organization may evaluate as fast as the bench asks (no monthly cap, no burst). */
const UNCAPPED = { eval_limit: null, eval_burst: 2_000_000_000 } as const;

export async function runAging(): Promise<AgingResult> {
  const seconds = envNumber('BENCH_SECONDS', 10);
  const rounds = envNumber('BENCH_ROUNDS', 6);
  const connections = envNumber('BENCH_CONNECTIONS', 64);
  const organizations = envNumber('BENCH_AGING_ORGS', 300);
  const soakSeconds = envNumber('BENCH_AGING_SOAK_SECONDS', 100);
  const soakRate = envNumber('BENCH_AGING_SOAK_RATE', 2500);
  const fillSubscribers = envNumber('BENCH_AGING_FILL', 12_000);
  const quietSeconds = envNumber('BENCH_AGING_QUIET_SECONDS', 15);
  const world = await createWorld(MEASURED_SHAPE);
  const db = createDb(world.env.DATABASE_URL!, { max: 2, statementTimeoutMillis: 600_000 });
  try {
    startNode('admin/src/server.ts', world.env);
    const aged = startGateway('aged', world.env, await freePort(), await freePort());
    await Promise.all([healthy(`${world.adminUrl}/healthz`), healthy(`${aged.url}/healthz`)]);
    const agingStarted = Date.now();

    // Many organizations, each different (its own number of features and plans), each evaluated a few times.
    log(`aging: ${organizations} organizations`);
    for (let i = 0; i < organizations; i++) {
      const org = await createOrganization(db, `Aging ${i}`);
      const features = 4 + (i % 29);
      await seed(db, org.organization_id, { features, plans: 1 + (i % 5), subscribers: 20 }, `age${i}`);
      for (let s = 0; s < 3; s++) {
        const res = await fetch(`${aged.url}/org/subscribers/sub-${(i + s) % 20}/entitlements/check`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': org.api_key },
          body: JSON.stringify({ feature: featureKey((i + s) % features, features) }),
        });
        await res.arrayBuffer();
      }
    }

    // The soak: evals at a bounded rate, an override replaced through the gateway every second.
    const soakOrg = await createOrganization(db, 'Aging soak');
    await seed(db, soakOrg.organization_id, MEASURED_SHAPE, 'soak');
    await db.updateTable('organizations').set(UNCAPPED).where('id', '=', soakOrg.organization_id).execute();
    log(`aging: soak of ${soakSeconds} s at ${soakRate} evals/s with an override write every second`);
    let soaking = true;
    let overrideWrites = 0;
    const writer = (async () => {
      // One write a second while the soak runs, and never more than the soak's seconds allow.
      for (let n = 0; soaking && n < soakSeconds * 2 + 10; n++) {
        const feature = n % MEASURED_SHAPE.features;
        const body =
          feature % 2 === 0 ? { kind: 'limit', limit: 100 + n } : { kind: 'flag', allowed: n % 4 === 1 };
        const res = await fetch(
          `${aged.url}/org/subscribers/sub-${(n * 37) % MEASURED_SHAPE.subscribers}/overrides/${featureKey(feature, MEASURED_SHAPE.features)}`,
          {
            method: 'PUT',
            headers: { 'content-type': 'application/json', 'x-api-key': soakOrg.api_key },
            body: JSON.stringify(body),
          },
        );
        await res.arrayBuffer();
        if (res.ok) overrideWrites += 1;
        await pause(1000);
      }
    })();
    const soak = await drive({
      url: aged.url,
      apiKey: soakOrg.api_key,
      route: 'check',
      subscribers: MEASURED_SHAPE.subscribers,
      features: MEASURED_SHAPE.features,
      connections: 16,
      seconds: soakSeconds,
      overallRate: soakRate,
    });
    soaking = false;
    await writer;

    // A large cache: one eval for each subscriber of another organization.
    const fillOrg = await createOrganization(db, 'Aging fill');
    await seed(db, fillOrg.organization_id, { ...MEASURED_SHAPE, subscribers: fillSubscribers }, 'fill');
    await db.updateTable('organizations').set(UNCAPPED).where('id', '=', fillOrg.organization_id).execute();
    world.entctl('snapshots', 'rebuild', '--org', fillOrg.organization_id);
    log(`aging: caching ${fillSubscribers} subscribers of another organization`);
    const fill = await drive({
      url: aged.url,
      apiKey: fillOrg.api_key,
      route: 'check',
      subscribers: fillSubscribers,
      features: MEASURED_SHAPE.features,
      connections,
      amount: fillSubscribers,
    });
    const agingSeconds = (Date.now() - agingStarted) / 1000;
    log(
      `aged in ${agingSeconds.toFixed(0)} s: soak ${soak.requests} evals (${soak.non2xx} non-2xx), ` +
        `${overrideWrites} override writes, fill non-2xx ${fill.non2xx}`,
    );

    const load = {
      apiKey: world.apiKey,
      route: 'check' as const,
      subscribers: MEASURED_SHAPE.subscribers,
      features: MEASURED_SHAPE.features,
      connections,
    };
    const warm = async (gateway: Gateway) => {
      await drive({ ...load, url: gateway.url, amount: MEASURED_SHAPE.subscribers * 5 });
      await drive({ ...load, url: gateway.url, seconds: Math.min(5, seconds) });
    };
    // The aged gateway's history ends as a gateway's often does: warm, then a quiet spell (a lull, a night).
    await warm(aged);
    log(`aging: a quiet spell of ${quietSeconds} s`);
    await pause(quietSeconds * 1000);
    // The reference and the A/A control: started and warmed the same way, one after the other.
    const fresh = startGateway('fresh', world.env, await freePort(), await freePort());
    await healthy(`${fresh.url}/healthz`);
    await warm(fresh);
    const control = startGateway('control', world.env, await freePort(), await freePort());
    await healthy(`${control.url}/healthz`);
    await warm(control);
    const gateways: Record<GatewayName, Gateway> = { aged, fresh, control };

    const measure = async (gateway: Gateway): Promise<GatewayFigures> => {
      const before = await gcTotals(gateway.metricsUrl);
      const figures = await driveMeasured(gateway.pid, world.redisUrl, {
        ...load,
        url: gateway.url,
        seconds,
      });
      const after = await gcTotals(gateway.metricsUrl);
      const perRequest = (value: number) => value / Math.max(1, figures.requests);
      return {
        ...figures,
        gcSecondsPerMillion: perRequest(after.seconds - before.seconds) * 1e6,
        scavengesPerThousand: perRequest(after.scavenges - before.scavenges) * 1000,
        youngGenerationBytes: after.youngGenerationBytes,
      };
    };
    log(`measuring: ${rounds} rounds of ${seconds} s per gateway, ${connections} connections, order rotating`);
    const byRound: AgingRound[] = [];
    const loadBefore = loadavg()[0]!;
    for (let round = 0; round < rounds; round++) {
      const order = roundOrder(round);
      const figures: Partial<Record<GatewayName, GatewayFigures>> = {};
      for (const name of order) figures[name] = await measure(gateways[name]);
      const measured = { order, aged: figures.aged!, fresh: figures.fresh!, control: figures.control! };
      const line = (f: GatewayFigures) =>
        `${f.rps.toFixed(0)}/s ${f.serverCpuUs.toFixed(1)} µs, ${f.scavengesPerThousand.toFixed(2)} scavenges ` +
        `per 1,000 requests, young generation ${mib(f.youngGenerationBytes)}`;
      log(
        `round ${round + 1} (${order.join(', ')}): aged ${line(measured.aged)}; fresh ${line(measured.fresh)}; ` +
          `control ${line(measured.control)}`,
      );
      byRound.push(measured);
    }
    const machineLoad = { before: loadBefore, after: loadavg()[0]!, cores: availableParallelism() };
    // Read after the rounds: a full collection shrinks V8's young generation when it follows an idle spell, which
    // would be the bench's doing rather than the gateway's history.
    const agedState = await stateOf(aged);
    const freshState = await stateOf(fresh);
    const controlState = await stateOf(control);
    const described = (state: GatewayState) =>
      `${mib(state.heapUsedBytes)} (old space ${mib(state.oldSpaceUsedBytes)}, ${state.cachedSubscribers} subscribers cached)`;
    log(
      `heap after a full collection: aged ${described(agedState)}, fresh ${described(freshState)}, ` +
        `control ${described(controlState)}`,
    );
    const ratios = { aged: compare(byRound, 'aged'), control: compare(byRound, 'control') };
    const verdict = verdictOf(ratios);
    log(verdict.summary);
    return {
      mode: 'aging',
      date: new Date().toISOString(),
      settings: {
        seconds,
        rounds,
        connections,
        organizations,
        soakSeconds,
        soakRate,
        fillSubscribers,
        quietSeconds,
        measuredSubscribers: MEASURED_SHAPE.subscribers,
        gatewayFlags: process.env.BENCH_GATEWAY_WITHOUT_FLAGS ? [] : GATEWAY_NODE_FLAGS,
      },
      aging: {
        seconds: agingSeconds,
        soakEvals: soak.requests,
        soakNon2xx: soak.non2xx,
        overrideWrites,
        fillNon2xx: fill.non2xx,
      },
      aged: agedState,
      fresh: freshState,
      control: controlState,
      rounds: byRound,
      machineLoad,
      ratios,
      verdict,
    };
  } finally {
    await db.destroy();
    await world.cleanup();
  }
}

/**
 * The order of the three gateways in each round: the six orders in turn, so over six rounds each gateway runs first,
 * second and last twice and precedes each other one in half the rounds (a drift within a round favours none).
 */
const ROUND_ORDERS: readonly GatewayName[][] = [
  ['aged', 'fresh', 'control'],
  ['control', 'fresh', 'aged'],
  ['fresh', 'control', 'aged'],
  ['aged', 'control', 'fresh'],
  ['control', 'aged', 'fresh'],
  ['fresh', 'aged', 'control'],
];

export const roundOrder = (round: number): GatewayName[] => [...ROUND_ORDERS[round % ROUND_ORDERS.length]!];

const ratio = (value: number) => value.toFixed(2);

const series = (perRound: number[]): RatioSeries => ({
  perRound,
  median: median(perRound),
  min: Math.min(...perRound),
  max: Math.max(...perRound),
});

const totalCpu = (f: MeasuredFigures) => f.serverCpuUs + f.redisCpuUs;

/** One gateway against the fresh reference, round by round. */
export function compare(rounds: AgingRound[], name: 'aged' | 'control'): Comparison {
  return {
    throughput: series(rounds.map((r) => r[name].rps / r.fresh.rps)),
    cpuEfficiency: series(rounds.map((r) => totalCpu(r.fresh) / totalCpu(r[name]))),
    gatewayCpuEfficiency: series(rounds.map((r) => r.fresh.serverCpuUs / r[name].serverCpuUs)),
    scavenges: series(rounds.map((r) => r[name].scavengesPerThousand / r.fresh.scavengesPerThousand)),
  };
}

function figureVerdict(aged: RatioSeries, control: RatioSeries): FigureVerdict {
  const noiseBand: [number, number] = [control.min, control.max];
  return {
    agedMedian: aged.median,
    controlMedian: control.median,
    meetsTarget: aged.median >= AGING_TARGET,
    noiseBand,
    againstNoise: aged.median < noiseBand[0] ? 'below' : aged.median > noiseBand[1] ? 'above' : 'within',
    roundsWorseThanControl: aged.perRound.filter((ratio, i) => ratio < control.perRound[i]!).length,
    resolvesTarget: noiseBand[0] >= AGING_TARGET && noiseBand[1] <= 1 / AGING_TARGET,
  };
}

/**
 * Passed when the aged gateway's medians keep at least the target of the reference's throughput and CPU efficiency;
 * the A/A control says how far two identical gateways differ here, so the summary says whether the aged gateway's
 * medians lie within that band (a shortfall within it is not told apart from noise, one below it is beyond noise).
 */
export function verdictOf(ratios: { aged: Comparison; control: Comparison }): AgingVerdict {
  const throughput = figureVerdict(ratios.aged.throughput, ratios.control.throughput);
  const cpuEfficiency = figureVerdict(ratios.aged.cpuEfficiency, ratios.control.cpuEfficiency);
  const passed = throughput.meetsTarget && cpuEfficiency.meetsTarget;
  const rounds = ratios.aged.throughput.perRound.length;
  const describe = (label: string, v: FigureVerdict) =>
    `${label} ${v.agedMedian.toFixed(2)} (control ${v.controlMedian.toFixed(2)}, band ${v.noiseBand[0].toFixed(2)} to ` +
    `${v.noiseBand[1].toFixed(2)}: ${v.againstNoise === 'within' ? 'within it' : `${v.againstNoise} it`}; worse than the ` +
    `control in ${v.roundsWorseThanControl} of ${rounds} rounds)`;
  const shortfalls = [throughput, cpuEfficiency].filter((v) => !v.meetsTarget);
  const conclusion = passed
    ? 'passed'
    : shortfalls.every((v) => v.againstNoise !== 'below')
      ? 'failed, within the noise an identical fresh gateway shows (this run cannot tell the shortfall from noise)'
      : 'failed, beyond the noise an identical fresh gateway shows';
  const resolution =
    throughput.resolvesTarget && cpuEfficiency.resolvesTarget
      ? ''
      : `; the control's band is wider than the margin tested (${AGING_TARGET} to ${ratio(1 / AGING_TARGET)}), so this ` +
        'run cannot resolve a difference that small either way';
  return {
    target: AGING_TARGET,
    passed,
    throughput,
    cpuEfficiency,
    summary:
      `${conclusion}: against the fresh gateway (target at least ${AGING_TARGET}), ${describe('throughput', throughput)}, ` +
      `${describe('CPU efficiency per request', cpuEfficiency)}${resolution}`,
  };
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
const fmt = (value: number) => Math.round(value).toLocaleString('en-US');

const spread = (r: RatioSeries) => `**${ratio(r.median)}** (${ratio(r.min)} to ${ratio(r.max)})`;

export function renderAging(result: AgingResult): string {
  const { settings: s, aging: a, ratios: r, verdict: v } = result;
  const side = (name: GatewayName, label: string) => {
    const figures = result.rounds.map((round) => round[name]);
    const state = result[name];
    return (
      `| ${label} | ${fmt(median(figures.map((f) => f.rps)))} | ${median(figures.map((f) => f.p99)).toFixed(1)} ms | ` +
      `${median(figures.map((f) => f.serverCpuUs)).toFixed(1)} µs + ${median(figures.map((f) => f.redisCpuUs)).toFixed(1)} µs Redis | ` +
      `${median(figures.map((f) => f.scavengesPerThousand)).toFixed(2)} | ` +
      `${median(figures.map((f) => f.gcSecondsPerMillion)).toFixed(2)} s | ${mib(state.heapUsedBytes)} | ${mib(state.oldSpaceUsedBytes)} | ` +
      `${fmt(state.cachedSubscribers)} |`
    );
  };
  const against = (label: string, c: Comparison) =>
    `| ${label} | ${spread(c.throughput)} | ${spread(c.cpuEfficiency)} | ${spread(c.gatewayCpuEfficiency)} | ` +
    `${spread(c.scavenges)} |`;
  const perRound = result.rounds.map(
    (round, i) =>
      `| ${i + 1} | ${round.order.join(', ')} | ${ratio(r.aged.throughput.perRound[i]!)} | ` +
      `${ratio(r.control.throughput.perRound[i]!)} | ${ratio(r.aged.cpuEfficiency.perRound[i]!)} | ` +
      `${ratio(r.control.cpuEfficiency.perRound[i]!)} |`,
  );
  const band = (f: FigureVerdict) => `${ratio(f.noiseBand[0])} to ${ratio(f.noiseBand[1])}`;
  const placed = (f: FigureVerdict) =>
    f.againstNoise === 'within' ? 'within' : f.againstNoise === 'below' ? 'below' : 'above';
  return [
    `A gateway aged by ${fmt(s.organizations)} organization${s.organizations === 1 ? '' : 's'} (each its own key and catalog), a ${s.soakSeconds} s soak ` +
      `(${fmt(a.soakEvals)} evals over 1,000 subscribers, ${a.overrideWrites} override writes through the gateway) and ` +
      `${fmt(s.fillSubscribers)} subscribers of another organization cached, then warm and idle for ${s.quietSeconds} s, ` +
      `against a fresh gateway started after that and an A/A control (a second fresh gateway started the same way); ` +
      `all three warm on ${fmt(s.measuredSubscribers)} subscribers of an organization none had seen; all run with ` +
      `${s.gatewayFlags.length ? s.gatewayFlags.map((f) => `\`${f}\``).join(' ') : 'no V8 flags'}. Medians of ${s.rounds} ` +
      `rounds of ${s.seconds} s per gateway, ${s.connections} connections, the order rotating through the six ` +
      `(${result.date.slice(0, 10)}${
        result.machineLoad
          ? `; the machine's load average ${result.machineLoad.before.toFixed(1)} before the rounds and ` +
            `${result.machineLoad.after.toFixed(1)} after, on ${result.machineLoad.cores} cores`
          : ''
      }):`,
    '',
    '| gateway | req/s | p99 | CPU per request | scavenges per 1,000 requests | GC pauses per million requests | heap after full GC | old space | subscribers cached |',
    '|---|---|---|---|---|---|---|---|---|',
    side('aged', 'aged'),
    side('fresh', 'fresh'),
    side('control', 'control (fresh, A/A)'),
    '',
    'Against the fresh gateway, medians of per-round ratios (lowest to highest round); CPU efficiency is the fresh ' +
      "one's CPU per request over the gateway's (gateway and Redis; then the gateway's own), so below 1 costs more:",
    '',
    '| against fresh | throughput | CPU efficiency per request | gateway CPU efficiency | scavenges per request |',
    '|---|---|---|---|---|',
    against('aged', r.aged),
    against('control (A/A)', r.control),
    '',
    '| round | order | aged throughput | control throughput | aged CPU efficiency | control CPU efficiency |',
    '|---|---|---|---|---|---|',
    ...perRound,
    '',
    `**Verdict: ${v.passed ? 'passed' : 'not passed'}** (target: the aged gateway keeps at least ${v.target} of the ` +
      `fresh one's throughput and CPU efficiency, medians). Throughput ${ratio(v.throughput.agedMedian)}, ` +
      `${placed(v.throughput)} the control's band (${band(v.throughput)}), worse than the control in ` +
      `${v.throughput.roundsWorseThanControl} of ${s.rounds} rounds; CPU efficiency ${ratio(v.cpuEfficiency.agedMedian)}, ` +
      `${placed(v.cpuEfficiency)} the control's band (${band(v.cpuEfficiency)}), worse than the control in ` +
      `${v.cpuEfficiency.roundsWorseThanControl} of ${s.rounds} rounds.` +
      (v.throughput.resolvesTarget && v.cpuEfficiency.resolvesTarget
        ? " The control's bands lie within the margin tested, so this run resolves a shortfall of that size."
        : ` The control's bands are wider than the margin tested (${v.target} to ${ratio(1 / v.target)}): two identical ` +
          'fresh gateways differed by more than that here, so this run cannot resolve a difference that small either way.'),
  ].join('\n');
}
