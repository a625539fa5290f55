/**
 * `npm run bench -- import`: `POST /org/imports` of BENCH_IMPORT_SUBSCRIBERS subscribers (default 1,000,000), each
 * with its subscription, into the seeded organization (DESIGN.md §5; targets: at least 10,000 subscribers/s on 2
 * cores, a million in under 3 minutes), while a gateway answers checks at a steady rate (its p99 during the import,
 * in 2-second slices). Reports subscribers/s from the POST to `succeeded` (staging, applying and publishing) and
 * the CPU per subscriber of admin and of its Postgres backends, which a busy machine does not distort as it does the
 * wall clock.
 */
import { request } from 'node:http';
import { loadavg } from 'node:os';
import {
  backendCpuSeconds,
  createWorld,
  envNumber,
  freePort,
  healthy,
  log,
  median,
  processCpuSeconds,
  redisCpuSeconds,
  startNode,
  startPrivateRedis,
} from '../harness.ts';
import { drive, type LoadFigures } from '../load.ts';
import { DEFAULT_SHAPE } from '../seed.ts';

export interface ImportResult {
  mode: 'import';
  date: string;
  settings: { subscribers: number; lines: number; batchSize: number; checkRate: number };
  loadAverage: { start: number; end: number };
  status: string;
  applied: number;
  failed: number;
  seconds: number;
  subscribersPerSecond: number;
  adminCpuUsPerSubscriber: number;
  postgresCpuUsPerSubscriber: number;
  /** The worker's, Redis's and the gateway's (its checks at checkRate included) CPU per subscriber meanwhile. */
  workerCpuUsPerSubscriber?: number;
  redisCpuUsPerSubscriber?: number;
  gatewayCpuUsPerSubscriber?: number;
  /** From the POST to its 202: the body read, checked and staged. */
  stagedSeconds?: number;
  /** The part of admin's and Postgres's CPU per subscriber spent before the 202 (staging). */
  stagingAdminCpuUsPerSubscriber?: number;
  stagingPostgresCpuUsPerSubscriber?: number;
  gatewayDuringImport: { slices: number; p99Median: number; p99Max: number; non2xx: number };
}

const PLAN = 'plan-0';

/** The body, generated as it is sent (a million lines are never held). */
function* importLines(subscribers: number): Generator<string> {
  for (let i = 0; i < subscribers; i++) {
    const id = `imported-${i}`;
    yield `{"type":"subscriber","subscriber_id":"${id}","name":"Imported ${i}"}\n{"type":"subscription","subscriber_id":"${id}","plan_id":"${PLAN}"}\n`;
  }
}

/** Streams the body with backpressure; resolves with the 202's import id. */
function postImport(adminUrl: string, apiKey: string, subscribers: number): Promise<string> {
  const url = new URL('/org/imports', adminUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', headers: { 'content-type': 'application/x-ndjson', 'x-api-key': apiKey } },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () =>
          res.statusCode === 202
            ? resolve((JSON.parse(text) as { import_id: string }).import_id)
            : reject(new Error(`import answered ${res.statusCode}: ${text}`)),
        );
      },
    );
    req.on('error', reject);
    const lines = importLines(subscribers);
    // Stepped with next(), not for...of: leaving a for...of to wait for 'drain' would close the generator, and the
    // body would end after its first chunks (the runs before this fix imported 443 subscribers, whatever was asked).
    const write = () => {
      let chunk = '';
      for (let next = lines.next(); !next.done; next = lines.next()) {
        chunk += next.value;
        if (chunk.length >= 64 * 1024) {
          if (!req.write(chunk)) return void req.once('drain', write);
          chunk = '';
        }
      }
      req.end(chunk);
    };
    write();
  });
}

async function importStatus(adminUrl: string, apiKey: string, id: string) {
  const res = await fetch(`${adminUrl}/org/imports/${id}`, { headers: { 'x-api-key': apiKey } });
  return (await res.json()) as { status: string; applied: number; failed: number; errors: unknown[] };
}

export async function runImport(): Promise<ImportResult> {
  const subscribers = envNumber('BENCH_IMPORT_SUBSCRIBERS', 1_000_000);
  const batchSize = envNumber('IMPORT_BATCH_SIZE', 5000);
  const checkRate = envNumber('BENCH_CHECK_RATE', 500);
  const startLoad = loadavg()[0]!;
  const shape = { ...DEFAULT_SHAPE, subscribers: envNumber('BENCH_SUBSCRIBERS', 10_000) };
  // A Redis of its own, so its CPU is the import's (and the gateway's checks') alone.
  const world = await createWorld(shape, { redisUrl: await startPrivateRedis() });
  try {
    const env = { ...world.env, IMPORT_BATCH_SIZE: String(batchSize) };
    const gatewayPort = await freePort();
    // BENCH_CPU_PROF=<dir> writes admin's and the worker's CPU profiles there (where an import spends its CPU).
    const cpuProfile = process.env.BENCH_CPU_PROF
      ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] }
      : {};
    const admin = startNode('admin/src/server.ts', env, cpuProfile);
    const worker = startNode('admin/src/worker.ts', env, cpuProfile);
    const gateway = startNode('gateway/src/server.ts', { ...env, GATEWAY_PORT: String(gatewayPort) });
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    await Promise.all([world.adminUrl, gatewayUrl].map((u) => healthy(`${u}/healthz`)));
    const load = {
      url: gatewayUrl,
      apiKey: world.apiKey,
      route: 'check' as const,
      subscribers: shape.subscribers,
      features: shape.features,
      connections: 8,
    };
    log(`warming the gateway on ${shape.subscribers} subscribers`);
    await drive({ ...load, amount: shape.subscribers });

    log(`importing ${subscribers} subscribers with their subscription (${subscribers * 2} lines)`);
    const adminCpu = processCpuSeconds(admin.pid);
    const workerCpu = processCpuSeconds(worker.pid);
    const gatewayCpu = processCpuSeconds(gateway.pid);
    const redisCpu = redisCpuSeconds(world.env.REDIS_URL!);
    const postgresCpu = await backendCpuSeconds(world.env.DATABASE_OWNER_URL!);
    const started = Date.now();
    let finished = false;
    const slices: LoadFigures[] = [];
    const during = (async () => {
      let offset = 0;
      while (!finished) {
        slices.push(await drive({ ...load, seconds: 2, overallRate: checkRate, offset: (offset += 977) }));
      }
    })();
    const id = await postImport(world.adminUrl, world.apiKey, subscribers);
    const stagedSeconds = (Date.now() - started) / 1000;
    const stagingAdminUsed = processCpuSeconds(admin.pid) - adminCpu;
    const stagingPostgresUsed = (await backendCpuSeconds(world.env.DATABASE_OWNER_URL!)) - postgresCpu;
    log(`202 after ${Math.round(stagedSeconds * 1000)} ms (body staged); applying`);
    let status = await importStatus(world.adminUrl, world.apiKey, id);
    while (status.status === 'running') {
      await new Promise((resolve) => setTimeout(resolve, 250));
      status = await importStatus(world.adminUrl, world.apiKey, id);
    }
    const seconds = (Date.now() - started) / 1000;
    const adminUsed = processCpuSeconds(admin.pid) - adminCpu;
    const workerUsed = processCpuSeconds(worker.pid) - workerCpu;
    const gatewayUsed = processCpuSeconds(gateway.pid) - gatewayCpu;
    const redisUsed = redisCpuSeconds(world.env.REDIS_URL!) - redisCpu;
    const postgresUsed = (await backendCpuSeconds(world.env.DATABASE_OWNER_URL!)) - postgresCpu;
    finished = true;
    await during;
    if (status.status !== 'succeeded' || status.failed > 0 || status.applied !== subscribers * 2)
      throw new Error(
        `the import ended ${status.status} with ${status.applied} of ${subscribers * 2} lines applied, ${status.failed} failed: ${JSON.stringify(status.errors.slice(0, 3))}`,
      );
    const p99s = slices.map((s) => s.p99);
    return {
      mode: 'import',
      date: new Date().toISOString(),
      settings: { subscribers, lines: subscribers * 2, batchSize, checkRate },
      loadAverage: { start: startLoad, end: loadavg()[0]! },
      status: status.status,
      applied: status.applied,
      failed: status.failed,
      seconds,
      subscribersPerSecond: subscribers / seconds,
      adminCpuUsPerSubscriber: (adminUsed / subscribers) * 1e6,
      postgresCpuUsPerSubscriber: (postgresUsed / subscribers) * 1e6,
      workerCpuUsPerSubscriber: (workerUsed / subscribers) * 1e6,
      redisCpuUsPerSubscriber: (redisUsed / subscribers) * 1e6,
      gatewayCpuUsPerSubscriber: (gatewayUsed / subscribers) * 1e6,
      stagedSeconds,
      stagingAdminCpuUsPerSubscriber: (stagingAdminUsed / subscribers) * 1e6,
      stagingPostgresCpuUsPerSubscriber: (stagingPostgresUsed / subscribers) * 1e6,
      gatewayDuringImport: {
        slices: slices.length,
        p99Median: p99s.length ? median(p99s) : 0,
        p99Max: p99s.length ? Math.max(...p99s) : 0,
        non2xx: slices.reduce((sum, s) => sum + s.non2xx, 0),
      },
    };
  } finally {
    await world.cleanup();
  }
}

export function renderImport(result: ImportResult): string {
  const g = result.gatewayDuringImport;
  return [
    `import of ${result.settings.subscribers} subscribers with their subscription (${result.settings.lines} lines, batches of ${result.settings.batchSize}):`,
    `  ${result.status} in ${result.seconds.toFixed(1)} s: ${Math.round(result.subscribersPerSecond)} subscribers/s (load average ${result.loadAverage.start.toFixed(1)} → ${result.loadAverage.end.toFixed(1)})`,
    `  CPU per subscriber: admin ${result.adminCpuUsPerSubscriber.toFixed(0)} µs, Postgres backends ${result.postgresCpuUsPerSubscriber.toFixed(0)} µs` +
      (result.redisCpuUsPerSubscriber === undefined
        ? ''
        : `, worker ${result.workerCpuUsPerSubscriber!.toFixed(0)} µs, Redis ${result.redisCpuUsPerSubscriber.toFixed(0)} µs, gateway ${result.gatewayCpuUsPerSubscriber!.toFixed(0)} µs (its checks included)`),
    ...(result.stagedSeconds === undefined
      ? []
      : [
          `  body staged (202) after ${result.stagedSeconds.toFixed(1)} s, CPU per subscriber until then: admin ${result.stagingAdminCpuUsPerSubscriber!.toFixed(0)} µs, Postgres ${result.stagingPostgresCpuUsPerSubscriber!.toFixed(0)} µs`,
        ]),
    `  gateway checks at ${result.settings.checkRate}/s meanwhile: p99 ${g.p99Median.toFixed(1)} ms (median of ${g.slices} 2 s slices), worst ${g.p99Max.toFixed(1)} ms, ${g.non2xx} non-2xx`,
  ].join('\n');
}
