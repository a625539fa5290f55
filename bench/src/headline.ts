/** The README's headline figures: a few same-run ratios and totals from the results the full tables come from. */
import type { FaultsDocument } from './faults/table.ts';
import type { AgingResult } from './modes/aging.ts';
import type { CreditsResult } from './modes/credits.ts';
import type { ExportResult } from './modes/export.ts';
import type { ImportResult } from './modes/import.ts';
import type { MemoryResult } from './modes/memory.ts';
import type { MeteringResult } from './modes/metering.ts';
import type { PinnedResult } from './modes/pinned.ts';
import type { ScaleResult } from './modes/scale.ts';
import type { ThroughputResult } from './modes/throughput.ts';

export interface HeadlineInputs {
  throughput: ThroughputResult | null;
  pinned: PinnedResult | null;
  memory: MemoryResult | null;
  scale: ScaleResult | null;
  faults: FaultsDocument | null;
  aging: AgingResult | null;
  metering: MeteringResult | null;
  imported: ImportResult | null;
  exported: ExportResult | null;
  credits: CreditsResult | null;
}

const count = (n: number) => Math.round(n).toLocaleString('en-US');

/** One row per results file present; null when there is none at all. */
export function renderHeadline({
  throughput,
  pinned,
  memory,
  scale,
  faults,
  aging,
  metering,
  imported,
  exported,
  credits,
}: HeadlineInputs): string | null {
  const rows: string[] = [];
  if (throughput) {
    const { ratios: r, settings: s } = throughput;
    rows.push(
      `| warm metered check against a bare Fastify route answering the same JSON (${s.connections} connections, same run) | ` +
        `${r.checkThroughputVsBare.toFixed(2)}× the throughput, ${r.checkP99VsBare.toFixed(2)}× the p99, ` +
        `${r.checkCpuVsBare.toFixed(2)}× the CPU per request | \`npm run bench\` |`,
    );
    const cached = throughput.sdk.find((f) => f.requestsSent === 0);
    const http = throughput.sdk.find((f) => f.requestsSent > 0);
    if (cached && http)
      rows.push(
        `| SDK \`check\` answered from its cache against the same check over HTTP | ${count(cached.opsPerSecond)} against ` +
          `${count(http.opsPerSecond)} calls/s | \`npm run bench\` |`,
      );
  }
  if (metering) {
    const { ratios: r } = metering;
    const withCredits = credits
      ? `; ${credits.ratios.heldThroughput.toFixed(2)}× the throughput with the allowance left, ` +
        `${credits.ratios.spentThroughput.toFixed(2)}× spending credits`
      : '';
    rows.push(
      `| \`consume\` of 1 against the plain check (same run; targets at least 0.9× and at most 1.15×)` +
        `${credits ? '; consume with five live credits against none (target at least 0.9×)' : ''} | ` +
        `${r.consumeThroughputVsCheck.toFixed(2)}× the throughput, ${r.consumeCpuVsCheck.toFixed(2)}× the CPU per request` +
        `${withCredits} | \`npm run bench -- metering\`${credits ? ', `-- credits`' : ''} |`,
    );
    const lone = metering.batches.filter((b) => b.connections === 1);
    if (lone.length)
      rows.push(
        `| a batch of 1,000 usage events from one connection, without and with an idempotency key per event ` +
          `(target p99 under 20 ms) | p50 ${lone.map((b) => b.p50.toFixed(1)).join(' and ')} ms, p99 ` +
          `${lone.map((b) => b.p99.toFixed(1)).join(' and ')} ms | \`npm run bench -- metering\` |`,
      );
  }
  if (imported) {
    const exportFigure = exported
      ? `; export ${count(exported.median.recordsPerSecond)} records/s (target 50,000) of ` +
        `${count(exported.settings.subscribers)} subscribers`
      : '';
    rows.push(
      `| import of ${count(imported.settings.subscribers)} subscribers with their subscription, gateways answering ` +
        `checks meanwhile (targets: 10,000/s, a million under 3 minutes)${exported ? '; export' : ''} | ` +
        `${imported.status} in ${imported.seconds.toFixed(1)} s, ${count(imported.subscribersPerSecond)}/s; gateway ` +
        `p99 ${imported.gatewayDuringImport.p99Median.toFixed(1)} ms, ${imported.gatewayDuringImport.non2xx} non-2xx` +
        `${exportFigure} | \`npm run bench -- import\`${exported ? ', `-- export`' : ''} |`,
    );
  }
  const check = pinned?.figures.find((f) => f.route === 'check');
  if (pinned && check)
    rows.push(
      `| one gateway pinned to one core, ${pinned.settings.features}-feature catalog | ${count(check.rps)} checks/s, ` +
        `p99 ${check.p99.toFixed(1)} ms | \`npm run bench -- pinned\` |`,
    );
  const largest = memory?.steps.at(-1);
  if (largest)
    rows.push(
      `| gateway memory per cached subscriber, ${count(largest.subscribers)} cached | ${count(largest.heapPerSubscriber)} B ` +
        `of heap, ${count(largest.rssPerSubscriber)} B RSS | \`npm run bench -- memory\` |`,
    );
  if (aging)
    rows.push(
      `| a gateway aged by ${count(aging.settings.organizations)} organizations, a soak with writes and a large cache, ` +
        `against a fresh one (same run) | ${aging.ratios.aged.throughput.median.toFixed(2)} of its throughput, ` +
        `${aging.ratios.aged.cpuEfficiency.median.toFixed(2)} of its CPU efficiency per request (a second fresh one: ` +
        `${aging.ratios.control.throughput.median.toFixed(2)}, ${aging.ratios.control.cpuEfficiency.median.toFixed(2)}) | ` +
        `\`npm run bench -- aging\` |`,
    );
  if (scale)
    rows.push(
      `| three gateways under load: eval count error, stale reads after a write's 2xx | ${scale.metering.error} of ` +
        `${count(scale.metering.seen2xx)}, ${scale.readYourWrites.staleReads} of ${count(scale.readYourWrites.reads)} | ` +
        `\`npm run bench -- scale\` |`,
    );
  if (scale?.metered) {
    const { consumes: c, reports: r } = scale.metered;
    rows.push(
      `| three gateways, consumes against hard limits and reports with repeated idempotency keys: allowed against ` +
        `Σ min(attempts, limit), reports read back against acknowledged | ${count(c.allowed)} of ${count(c.expectedAllowed)}, ` +
        `${count(r.usedReadBack)} of ${count(r.expectedUsed)} | \`npm run bench -- scale\` |`,
    );
  }
  if (faults) {
    const lost = faults.results.reduce((sum, r) => sum + r.lostWrites, 0);
    const countErrors = faults.results.filter((r) => r.count.error !== 0).length;
    const metered = faults.results.filter((r) => r.metered);
    const meteredFigures = metered.length
      ? `; ${metered.length} of them with consumes and reports running: usage lost ` +
        `${metered.reduce((sum, r) => sum + r.metered!.usageLost, 0)}, over-consumed ` +
        `${metered.reduce((sum, r) => sum + r.metered!.overConsumed, 0)}`
      : '';
    rows.push(
      `| ${faults.results.length} injected faults (Redis, Postgres, admin, worker, gateway): lost writes, scenarios ` +
        `with an eval count off${metered.length ? '; usage lost, consumes allowed over the limit' : ''} | ${lost}, ` +
        `${countErrors}${meteredFigures} (${faults.passed ? 'every invariant held' : 'SOME INVARIANTS FAILED'}) | ` +
        `\`npm run faults\` |`,
    );
  }
  if (rows.length === 0) return null;
  const dates = [
    throughput?.date,
    pinned?.date,
    memory?.date,
    scale?.date,
    aging?.date,
    metering?.date,
    credits?.date,
    imported?.date,
    exported?.date,
    faults?.started_at,
  ]
    .filter((date): date is string => date !== undefined)
    .map((date) => date.slice(0, 10))
    .sort();
  return [
    `On one shared 2-core machine, ${dates[0] === dates.at(-1) ? dates[0] : `${dates[0]} to ${dates.at(-1)}`}:`,
    '',
    '| measured | figure | command |',
    '|---|---|---|',
    ...rows,
  ].join('\n');
}
