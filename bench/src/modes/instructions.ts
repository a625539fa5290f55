/**
 * `npm run bench -- instructions`: CPU per request as a count, not a time. Each server runs under valgrind's
 * callgrind, which counts the instructions a process executes: run alone, the same code under the same load counts
 * the same within about 2% on the main thread, where seconds on this shared machine move by up to 45% between two identical servers.
 * Run it with nothing else busy: other work on the machine changes how many requests each event-loop turn takes in,
 * and so the count per request (with `npm test` running beside it, the bare route counted 90k instead of 112k and
 * the gateway 1.46× it instead of 1.13×). The bare Fastify route and the gateway's warm metered check, one after the other: each is warmed (one
 * eval per subscriber, then 10,000 more), its counters are zeroed, BENCH_REQUESTS checks are driven at
 * BENCH_CONNECTIONS, and the counts are dumped. The main thread (JavaScript, the event loop, the kernel calls'
 * user side) is reported apart from all threads (V8's GC and compiler helpers, libuv's pool), which move more
 * from run to run. Kernel time and Redis are not counted: `npm run bench` measures those.
 * The ratio is not the timed one: under valgrind a server runs about fifty times slower, so each event-loop turn and
 * each metering call take in far more requests than natively and their fixed costs almost vanish per request (at 8
 * connections the gateway counted 1.60× the bare route, at 64 1.13×; timed, its user time is about 1.45×).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWorld, envNumber, freePort, healthy, log, startNode } from '../harness.ts';
import { drive } from '../load.ts';

export interface InstructionFigures {
  name: string;
  requests: number;
  non2xx: number;
  /** Instructions per request on the main thread. */
  mainThread: number;
  /** Instructions per request on every thread of the process. */
  allThreads: number;
}

export interface InstructionsResult {
  mode: 'instructions';
  date: string;
  settings: { requests: number; connections: number; subscribers: number; features: number; plans: number };
  figures: InstructionFigures[];
  ratios: { mainThreadVsBare: number; allThreadsVsBare: number };
}

/** Under valgrind a server starts about fifty times slower than it does natively. */
const START_TIMEOUT_MS = 600_000;

/** Instructions per thread (thread number → count) in the dumps callgrind wrote for `pid`. */
function threadTotals(dir: string, pid: number): Map<number, number> {
  const totals = new Map<number, number>();
  for (const file of readdirSync(dir)) {
    // `<name>.<pid>.out.<dump>-<thread>`: the final dump at exit has no `.<dump>` and is not wanted.
    const match = new RegExp(`\\.${pid}\\.out\\.\\d+-(\\d+)$`).exec(file);
    if (!match) continue;
    const total = /^(?:totals|summary): (\d+)/m.exec(readFileSync(join(dir, file), 'utf8'));
    if (total) totals.set(Number(match[1]), Number(total[1]));
  }
  return totals;
}

export async function runInstructions(): Promise<InstructionsResult> {
  if (spawnSync('valgrind', ['--version']).status !== 0) {
    throw new Error('the instructions mode needs valgrind (Debian package valgrind)');
  }
  const requests = envNumber('BENCH_REQUESTS', 30_000);
  const connections = envNumber('BENCH_CONNECTIONS', 64);
  const shape = { features: 20, plans: 5, subscribers: envNumber('BENCH_SUBSCRIBERS', 5000) };
  const dir = mkdtempSync(join(tmpdir(), 'bench-callgrind-'));
  const world = await createWorld(shape);
  const figures: InstructionFigures[] = [];
  try {
    startNode('admin/src/server.ts', world.env);
    await healthy(`${world.adminUrl}/healthz`);
    figures.push(await count('bare fastify', 'bench/src/bare-server.ts'));
    figures.push(await count('gateway check', 'gateway/src/server.ts'));
  } finally {
    await world.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
  const [bare, gateway] = figures as [InstructionFigures, InstructionFigures];
  return {
    mode: 'instructions',
    date: new Date().toISOString(),
    settings: { requests, connections, ...shape },
    figures,
    ratios: { mainThreadVsBare: gateway.mainThread / bare.mainThread, allThreadsVsBare: gateway.allThreads / bare.allThreads },
  };

  async function count(name: string, script: string): Promise<InstructionFigures> {
    const port = await freePort();
    const metricsPort = await freePort();
    const label = name.replace(/\W+/g, '-');
    log(`${name}: starting under callgrind`);
    // Started like every bench child, so an interrupted run stops it too.
    const server = startNode(
      script,
      { ...world.env, GATEWAY_PORT: String(port), GATEWAY_METRICS_PORT: String(metricsPort), BARE_PORT: String(port) },
      {
        under: [
          'valgrind',
          '--tool=callgrind',
          '--separate-threads=yes',
          `--callgrind-out-file=${join(dir, `${label}.%p.out`)}`,
          `--log-file=${join(dir, `${label}.%p.log`)}`,
        ],
      },
    );
    const { pid } = server;
    const exited = new Promise((resolve) => server.process.once('exit', resolve));
    try {
      const url = `http://127.0.0.1:${port}`;
      await healthy(`${url}/healthz`, START_TIMEOUT_MS);
      const load = { url, apiKey: world.apiKey, subscribers: shape.subscribers, features: shape.features, connections, route: 'check' as const };
      await drive({ ...load, amount: shape.subscribers });
      await drive({ ...load, amount: 10_000 });
      spawnSync('callgrind_control', ['--zero', String(pid)], { stdio: 'ignore' });
      const measured = await drive({ ...load, amount: requests });
      spawnSync('callgrind_control', ['--dump', String(pid)], { stdio: 'ignore' });
      let totals = threadTotals(dir, pid);
      for (let waited = 0; !totals.has(1) && waited < 60; waited++) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        totals = threadTotals(dir, pid);
      }
      const main = totals.get(1);
      if (main === undefined) throw new Error(`callgrind wrote no dump for ${name}`);
      const all = [...totals.values()].reduce((sum, value) => sum + value, 0);
      const figures = {
        name,
        requests: measured.requests,
        non2xx: measured.non2xx,
        mainThread: main / measured.requests,
        allThreads: all / measured.requests,
      };
      log(`${name}: ${figures.mainThread.toFixed(0)} instructions per request on the main thread, ${figures.allThreads.toFixed(0)} on all`);
      return figures;
    } finally {
      server.process.kill('SIGTERM');
      await exited;
    }
  }
}

const thousands = (value: number) => `${(value / 1000).toFixed(1)}k`;

export function renderInstructions(result: InstructionsResult): string {
  const { settings: s, ratios } = result;
  const rows = result.figures.map(
    (f) => `| ${f.name} | ${thousands(f.mainThread)} | ${thousands(f.allThreads)} | ${f.requests.toLocaleString('en-US')} | ${f.non2xx} |`,
  );
  return [
    `Instructions per request under callgrind (\`npm run bench -- instructions\`), ${s.requests.toLocaleString('en-US')} checks at ${s.connections} connections after warming, ${s.subscribers.toLocaleString('en-US')} subscribers, ${result.date.slice(0, 10)}:`,
    '',
    '| server | main thread | all threads | requests | non-2xx |',
    '|---|---|---|---|---|',
    ...rows,
    '',
    `The gateway's warm metered check executes **${ratios.mainThreadVsBare.toFixed(2)}×** the bare route's instructions on the main thread and ${ratios.allThreadsVsBare.toFixed(2)}× on all threads (kernel time and Redis not counted).`,
  ].join('\n');
}
