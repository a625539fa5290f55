/**
 * `npm run bench [-- MODE]`: one of
 *   throughput (default)  the warm metered check against a bare Fastify route, list, OFREP and the SDK
 *   memory               RSS and heap per cached subscriber at 100k and 1M subscribers
 *   memory-credits       heap per subscriber holding credits, step by step, against what the cache bound counts
 *   pinned               the gateway on one core, load and Redis on the other; 350 features
 *   scale                three gateways: aggregate throughput, exact metering, read-your-writes under load
 *   profile              where the gateway's and the bare route's CPU goes, per request (Linux perf)
 *   profile-consume      the same for a consume of 1 against the plain check, on one gateway
 *   profile-credits      the same for a consume holding five credits against one holding none
 *                        (BENCH_PROFILE_CREDITS=spent: each spends a credit)
 *   instructions         instructions per request under callgrind: the gateway's check against the bare route
 *   aging                a gateway aged by many organizations, a soak with writes and a large cache, against a fresh one
 *                        and an A/A control (a second fresh one)
 *   metering             consume against the plain check, batches of 1,000 usage events, exact usage (DESIGN.md §5)
 *   import               POST /org/imports of a million subscribers with their subscription, gateway p99 meanwhile
 *   credits              consume with five live credits against consume with none, nothing double-spent (issue 35)
 *   consume-floor        the least Redis CPU a consume adds in this design: balance commands and the drain, no gateway
 *   persist              the worker's metered persister: worker, Postgres and Redis CPU per persisted balance
 * Each writes bench/results/<mode>.json; `npm run bench:readme` makes the tables of docs/benchmarks.md from those files.
 * Every mode uses a fresh database and Redis key prefix, targets 127.0.0.1 only, is bounded in time, and
 * stops what it started by PID. Settings: BENCH_SECONDS, BENCH_ROUNDS, BENCH_CONNECTIONS, BENCH_SUBSCRIBERS.
 */
import { cleanUpEverything, log, stopChildren } from './harness.ts';
import { runAging, renderAging } from './modes/aging.ts';
import { runMemory, renderMemory } from './modes/memory.ts';
import { runCreditsMemory, renderCreditsMemory } from './modes/memory-credits.ts';
import { runConsumeFloor, renderConsumeFloor } from './modes/consume-floor.ts';
import { runCredits, renderCredits } from './modes/credits.ts';
import { runMetering, renderMetering } from './modes/metering.ts';
import { runExport, renderExport } from './modes/export.ts';
import { runImport, renderImport } from './modes/import.ts';
import { runPinned, renderPinned } from './modes/pinned.ts';
import { runPersist, renderPersist } from './modes/persist.ts';
import { runInstructions, renderInstructions } from './modes/instructions.ts';
import { runConsumeProfile, runCreditsProfile, runProfile, renderProfile } from './modes/profile.ts';
import { runScale, renderScale } from './modes/scale.ts';
import { runThroughput, renderThroughput } from './modes/throughput.ts';
import { writeResult } from './results.ts';

export const modes = {
  throughput: { run: runThroughput, render: renderThroughput },
  memory: { run: runMemory, render: renderMemory },
  'memory-credits': { run: runCreditsMemory, render: renderCreditsMemory },
  pinned: { run: runPinned, render: renderPinned },
  scale: { run: runScale, render: renderScale },
  profile: { run: runProfile, render: renderProfile },
  'profile-consume': { run: runConsumeProfile, render: renderProfile },
  'profile-credits': { run: runCreditsProfile, render: renderProfile },
  instructions: { run: runInstructions, render: renderInstructions },
  aging: { run: runAging, render: renderAging },
  metering: { run: runMetering, render: renderMetering },
  export: { run: runExport, render: renderExport },
  import: { run: runImport, render: renderImport },
  credits: { run: runCredits, render: renderCredits },
  'consume-floor': { run: runConsumeFloor, render: renderConsumeFloor },
  persist: { run: runPersist, render: renderPersist },
} as const;

export type Mode = keyof typeof modes;

const isMode = (value: string): value is Mode => value in modes;

const mode = process.argv[2] ?? 'throughput';
if (!isMode(mode)) {
  process.stderr.write(`unknown mode "${mode}"; one of: ${Object.keys(modes).join(', ')}\n`);
  process.exit(2);
}
// Interrupted: the worlds' databases and Redis keys go as well, not only the processes.
const stop = () => void cleanUpEverything().then(() => process.exit(130));
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
try {
  const { run, render } = modes[mode] as { run: () => Promise<object>; render: (result: never) => string };
  const result = await run();
  const file = writeResult(mode, result);
  process.stdout.write(`\n${render(result as never)}\n\n`);
  log(`wrote ${file}; npm run bench:readme puts it in docs/benchmarks.md`);
} finally {
  await stopChildren();
}
