/**
 * `npm run bench -- aging`: does a gateway that has served a long, mixed history answer as cheaply as a fresh one?
 *
 * One gateway is aged first: many small organizations (each with its own key and catalog, evaluated a few times),
 * a soak (evals at a bounded rate over 1,000 subscribers of one organization while an override is written through
 * the gateway every second), a large cache (one eval for each subscriber of another organization), its warm-up on the
 * measured organization (1,000 subscribers neither gateway has seen before) and a quiet spell. A second gateway is
 * started fresh after that and warmed the same way. Both are measured in alternating rounds of the same run (every other round in
 * reverse order), so the machine's drift weighs on both alike. Reported: the aged gateway's throughput and CPU per
 * request against the fresh one's (medians of per-round ratios), and each one's heap and GC work.
 *
 * Settings: BENCH_SECONDS (per round, default 10), BENCH_ROUNDS (default 6), BENCH_CONNECTIONS (default 64),
 * BENCH_AGING_ORGS (default 300), BENCH_AGING_SOAK_SECONDS (default 100), BENCH_AGING_SOAK_RATE (evals/s, default
 * 2,500), BENCH_AGING_FILL (subscribers cached, default 12,000), BENCH_AGING_QUIET_SECONDS (the aged gateway's idle
 * spell before the fresh one starts, default 15); BENCH_GATEWAY_WITHOUT_FLAGS=1 runs both gateways without their V8
 * flags (gateway/src/runtime-flags.ts), to see what those change; BENCH_AGING_NODE_ARGS=--trace-gc-nvp with
 * BENCH_CHILD_STDOUT=/tmp/gc keeps each gateway's collections in /tmp/gc.<pid>. A smoke run: BENCH_AGING_ORGS=40
 * BENCH_AGING_SOAK_SECONDS=20 BENCH_AGING_FILL=3000 BENCH_ROUNDS=4 BENCH_SECONDS=4.
 */
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

export interface AgingRound {
  aged: GatewayFigures;
  fresh: GatewayFigures;
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
    /** The V8 flags both gateways ran with (none: BENCH_GATEWAY_WITHOUT_FLAGS). */
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
  rounds: AgingRound[];
  ratios: {
    /** Aged over fresh requests per second: medians of per-round ratios (target at least 0.97). */
    throughput: number;
    /** Fresh over aged CPU per request, gateway and Redis (target at least 0.97). */
    cpuEfficiency: number;
    /** Fresh over aged CPU per request, the gateway's own. */
    gatewayCpuEfficiency: number;
    /** Aged over fresh scavenges per request: above 1, the aged gateway collects its young generation more often. */
    scavenges: number;
  };
}

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
      for (let n = 0; soaking; n++) {
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
    const fresh = startGateway('fresh', world.env, await freePort(), await freePort());
    await healthy(`${fresh.url}/healthz`);
    await warm(fresh);

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
    log(`measuring: ${rounds} alternating rounds of ${seconds} s, ${connections} connections`);
    const byRound: AgingRound[] = [];
    for (let round = 0; round < rounds; round++) {
      const first = round % 2 === 0 ? aged : fresh;
      const second = first === aged ? fresh : aged;
      const a = await measure(first);
      const b = await measure(second);
      const figures = first === aged ? { aged: a, fresh: b } : { aged: b, fresh: a };
      const line = (f: GatewayFigures) =>
        `${f.rps.toFixed(0)}/s ${f.serverCpuUs.toFixed(1)} µs, ${f.scavengesPerThousand.toFixed(2)} scavenges ` +
        `per 1,000 requests, young generation ${mib(f.youngGenerationBytes)}`;
      log(`round ${round + 1}: aged ${line(figures.aged)}; fresh ${line(figures.fresh)}`);
      byRound.push(figures);
    }
    // Read after the rounds: a full collection shrinks V8's young generation when it follows an idle spell, which
    // would be the bench's doing rather than the gateway's history.
    const agedState = await stateOf(aged);
    const freshState = await stateOf(fresh);
    log(
      `heap after a full collection: aged ${mib(agedState.heapUsedBytes)} (old space ${mib(agedState.oldSpaceUsedBytes)}, ` +
        `${agedState.cachedSubscribers} subscribers cached), fresh ${mib(freshState.heapUsedBytes)} ` +
        `(old space ${mib(freshState.oldSpaceUsedBytes)}, ${freshState.cachedSubscribers} cached)`,
    );
    const totalCpu = (f: MeasuredFigures) => f.serverCpuUs + f.redisCpuUs;
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
      rounds: byRound,
      ratios: {
        throughput: median(byRound.map((r) => r.aged.rps / r.fresh.rps)),
        cpuEfficiency: median(byRound.map((r) => totalCpu(r.fresh) / totalCpu(r.aged))),
        gatewayCpuEfficiency: median(byRound.map((r) => r.fresh.serverCpuUs / r.aged.serverCpuUs)),
        scavenges: median(byRound.map((r) => r.aged.scavengesPerThousand / r.fresh.scavengesPerThousand)),
      },
    };
  } finally {
    await db.destroy();
    await world.cleanup();
  }
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
const fmt = (value: number) => Math.round(value).toLocaleString('en-US');

export function renderAging(result: AgingResult): string {
  const { settings: s, aging: a, ratios: r } = result;
  const side = (name: string, pick: (round: AgingRound) => GatewayFigures, state: GatewayState) => {
    const figures = result.rounds.map(pick);
    return (
      `| ${name} | ${fmt(median(figures.map((f) => f.rps)))} | ${median(figures.map((f) => f.p99)).toFixed(1)} ms | ` +
      `${median(figures.map((f) => f.serverCpuUs)).toFixed(1)} µs + ${median(figures.map((f) => f.redisCpuUs)).toFixed(1)} µs Redis | ` +
      `${median(figures.map((f) => f.scavengesPerThousand)).toFixed(2)} | ` +
      `${median(figures.map((f) => f.gcSecondsPerMillion)).toFixed(2)} s | ${mib(state.heapUsedBytes)} | ${mib(state.oldSpaceUsedBytes)} | ` +
      `${fmt(state.cachedSubscribers)} |`
    );
  };
  return [
    `A gateway aged by ${fmt(s.organizations)} organizations (each its own key and catalog), a ${s.soakSeconds} s soak ` +
      `(${fmt(a.soakEvals)} evals over 1,000 subscribers, ${a.overrideWrites} override writes through the gateway) and ` +
      `${fmt(s.fillSubscribers)} subscribers of another organization cached, then warm and idle for ${s.quietSeconds} s, against a gateway ` +
      `started after that; both ` +
      `warm on ${fmt(s.measuredSubscribers)} subscribers of an organization neither had seen; both run with ` +
      `${s.gatewayFlags.length ? s.gatewayFlags.map((f) => `\`${f}\``).join(' ') : 'no V8 flags'}. Medians of ${s.rounds} ` +
      `alternating rounds of ${s.seconds} s, ${s.connections} connections (${result.date.slice(0, 10)}):`,
    '',
    '| gateway | req/s | p99 | CPU per request | scavenges per 1,000 requests | GC pauses per million requests | heap after full GC | old space | subscribers cached |',
    '|---|---|---|---|---|---|---|---|---|',
    side('aged', (round) => round.aged, result.aged),
    side('fresh', (round) => round.fresh, result.fresh),
    '',
    `The aged gateway keeps **${r.throughput.toFixed(2)}** of the fresh one's throughput and **${r.cpuEfficiency.toFixed(2)}** ` +
      `of its CPU efficiency per request, gateway and Redis (fresh over aged CPU per request; the gateway's own ` +
      `${r.gatewayCpuEfficiency.toFixed(2)}); medians of per-round ratios, target at least 0.97 for both. It scavenges ` +
      `${r.scavenges.toFixed(2)}× as often per request.`,
  ].join('\n');
}
