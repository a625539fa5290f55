/**
 * `npm run bench -- pinned`: the gateway pinned to one core (taskset -c 0); admin, a private Redis and the load
 * generator (this process) on the other. A 350-feature catalog, 5 plans, 10,000 subscribers; the check route
 * and the list route (all=true: every one of the 350 features), each for BENCH_SECONDS, at BENCH_CONNECTIONS.
 * For comparison with Unleash Edge's published 1-CPU figure for its 350-feature dataset.
 */
import { spawnSync } from 'node:child_process';
import {
  createWorld,
  driveMeasured,
  envNumber,
  freePort,
  healthy,
  log,
  startNode,
  startPrivateRedis,
  type MeasuredFigures,
} from '../harness.ts';
import { drive } from '../load.ts';

/** `serverCpuUs` is the gateway's CPU per request (it has one core: 1e6 / it is its ceiling). */
export interface PinnedFigures extends MeasuredFigures {
  route: 'check' | 'list';
}

export interface PinnedResult {
  mode: 'pinned';
  date: string;
  settings: { seconds: number; connections: number; features: number; plans: number; subscribers: number };
  figures: PinnedFigures[];
  reference: { name: string; rps: number; p95Ms: number };
}

const UNLEASH_EDGE = { name: 'Unleash Edge, 1 CPU, 350-feature dataset (published)', rps: 6900, p95Ms: 7.4 };

export async function runPinned(): Promise<PinnedResult> {
  const seconds = envNumber('BENCH_SECONDS', 10);
  const connections = envNumber('BENCH_CONNECTIONS', 64);
  const shape = { features: 350, plans: 5, subscribers: 10_000 };
  // This process (the load generator) on core 1, with everything but the gateway.
  spawnSync('taskset', ['-apc', '1', String(process.pid)], { stdio: 'ignore' });
  const world = await createWorld(shape, { redisUrl: await startPrivateRedis(['taskset', '-c', '1']) });
  try {
    const gatewayPort = await freePort();
    startNode('admin/src/server.ts', world.env, { cpus: '1' });
    const gateway = startNode('gateway/src/server.ts', { ...world.env, GATEWAY_PORT: String(gatewayPort) }, { cpus: '0' });
    const url = `http://127.0.0.1:${gatewayPort}`;
    await Promise.all([healthy(`${world.adminUrl}/healthz`), healthy(`${url}/healthz`)]);
    const load = { url, apiKey: world.apiKey, subscribers: shape.subscribers, features: shape.features, connections };
    await drive({ ...load, route: 'check', amount: shape.subscribers });
    await drive({ ...load, route: 'list', seconds: 2 });
    const figures: PinnedFigures[] = [];
    for (const route of ['check', 'list'] as const) {
      const measured = await driveMeasured(gateway.pid, world.redisUrl, { ...load, route, seconds });
      figures.push({ route, ...measured });
      log(`${route}: ${measured.rps.toFixed(0)} req/s, p95 ${measured.p95.toFixed(1)} ms, ${measured.serverCpuUs.toFixed(0)} µs CPU each`);
    }
    return {
      mode: 'pinned',
      date: new Date().toISOString(),
      settings: { seconds, connections, ...shape },
      figures,
      reference: UNLEASH_EDGE,
    };
  } finally {
    await world.cleanup();
  }
}

export function renderPinned(result: PinnedResult): string {
  const { settings: s } = result;
  const rows = result.figures.map(
    (f) =>
      `| gateway, ${f.route === 'check' ? 'check (one feature)' : `list all=true (${s.features} features)`} | ` +
      `${Math.round(f.rps).toLocaleString('en-US')} | ${f.p95.toFixed(1)} ms | ${f.p99.toFixed(1)} ms | ` +
      `${f.serverCpuUs.toFixed(0)} µs | ${f.non2xx} |`,
  );
  return [
    `Gateway pinned to one core (\`taskset -c 0\`); admin, its own Redis and the load generator on the other; ` +
      `${s.features} features, ${s.plans} plans, ${s.subscribers.toLocaleString('en-US')} subscribers, ` +
      `${s.connections} connections, ${s.seconds} s each (${result.date.slice(0, 10)}):`,
    '',
    '| target | req/s | p95 | p99 | gateway CPU per request | non-2xx |',
    '|---|---|---|---|---|---|',
    ...rows,
    `| ${result.reference.name} | ${result.reference.rps.toLocaleString('en-US')} | ${result.reference.p95Ms} ms | | | |`,
    '',
    "Every gateway request here is metered (one Redis script call per batch); Edge's figure is its own, measured",
    'elsewhere on other hardware, so read the comparison as an order of magnitude, not a ratio.',
  ].join('\n');
}
