import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ScenarioResult, Tally } from './matrix.ts';

const others = (t: Tally) => Object.values(t.other).reduce((sum, n) => sum + n, 0);
/** Metered rows' figures; rows without consumes and reports say n/a. */
const usageLost = (r: ScenarioResult) => (r.metered ? String(r.metered.usageLost) : 'n/a');
const overConsumed = (r: ScenarioResult) => (r.metered ? String(r.metered.overConsumed) : 'n/a');

const columns = [
  '#',
  'scenario',
  'injected',
  'requests',
  '2xx / 503 / other',
  'lost writes',
  'usage lost',
  'over-consumed',
  'count error',
  'converged',
  'result',
];

function cells(result: ScenarioResult, index: number): string[] {
  const { evals, writes, count } = result;
  const error =
    count.error === null ? 'n/a' : count.error === 0 ? '0' : `${count.error > 0 ? '+' : ''}${count.error}`;
  return [
    String(index + 1),
    result.scenario,
    result.injected,
    String(evals.total + writes.total),
    `${evals.ok + writes.ok} / ${evals.unavailable + writes.unavailable} / ${others(evals) + others(writes)}`,
    String(result.lostWrites),
    usageLost(result),
    overConsumed(result),
    `${error} (${count.actual ?? '?'} vs ${count.expected}${count.allowedExtra ? `+${count.allowedExtra}` : ''})`,
    result.convergedMs === null ? 'no (30 s)' : `${(result.convergedMs / 1000).toFixed(1)} s`,
    result.passed ? 'PASS' : 'FAIL',
  ];
}

/** A plain-text table for the terminal, then each scenario's failures and notes. */
export function renderTable(results: ScenarioResult[]): string {
  const rows = [columns, ...results.map(cells)];
  const widths = columns.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const line = (row: string[]) => row.map((cell, i) => cell.padEnd(widths[i]!)).join(' | ');
  const out = [line(columns), widths.map((w) => '-'.repeat(w)).join('-|-'), ...rows.slice(1).map(line), ''];
  results.forEach((result, i) => {
    out.push(
      `${i + 1}. ${result.scenario}: ${result.passed ? 'all invariants held' : `${result.failures.length} failure(s)`}`,
    );
    for (const failure of result.failures.slice(0, 15)) out.push(`   FAIL ${failure}`);
    if (result.failures.length > 15)
      out.push(`   ... and ${result.failures.length - 15} more (see the JSON file)`);
    const other = { ...result.evals.other };
    for (const [key, n] of Object.entries(result.writes.other))
      other[`write ${key}`] = (other[`write ${key}`] ?? 0) + n;
    out.push(
      `   evals ${result.evals.ok}/${result.evals.unavailable}/${others(result.evals)}, writes ${result.writes.ok}/${result.writes.unavailable}/${others(result.writes)}; other: ${JSON.stringify(other)}`,
    );
    out.push(`   ${result.count.rule}`);
    for (const note of result.notes) out.push(`   ${note}`);
  });
  return out.join('\n');
}

/** bench/results/faults-<date>.json: written on every run, committed once the fixes have been measured. */
export function writeResults(root: string, document: Record<string, unknown>): string {
  const dir = join(root, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `faults-${new Date().toISOString().slice(0, 10)}.json`);
  writeFileSync(file, `${JSON.stringify(document, null, 2)}\n`);
  return file;
}

/** What `npm run faults` writes to bench/results/faults-<date>.json (the fields the documents show). */
export interface FaultsDocument {
  command: string;
  started_at: string;
  passed: boolean;
  results: ScenarioResult[];
}

/** The newest bench/results/faults-<date>.json (dates sort as text), or null before any run. */
export function readLatestFaults(root: string): FaultsDocument | null {
  const dir = join(root, 'bench', 'results');
  if (!existsSync(dir)) return null;
  const latest = readdirSync(dir)
    .filter((name) => /^faults-\d{4}-\d{2}-\d{2}\.json$/.test(name))
    .sort()
    .at(-1);
  return latest ? (JSON.parse(readFileSync(join(dir, latest), 'utf8')) as FaultsDocument) : null;
}

function countCell({ count }: ScenarioResult): string {
  const error = count.error === null ? 'n/a' : count.error > 0 ? `+${count.error}` : String(count.error);
  const extra = count.allowedExtra ? ` + ${count.allowedExtra} cut off in flight` : '';
  return `${error} (${count.actual ?? '?'} vs ${count.expected}${extra})`;
}

/** The matrix as a Markdown table, for docs/operations.md (`npm run bench:readme`). */
export function renderMarkdown(document: FaultsDocument): string {
  const rows = document.results.map((result, i) => {
    const { evals, writes } = result;
    const cells = [
      String(i + 1),
      result.scenario,
      result.injected,
      String(evals.total + writes.total),
      `${evals.ok + writes.ok} / ${evals.unavailable + writes.unavailable} / ${others(evals) + others(writes)}`,
      String(result.lostWrites),
      usageLost(result),
      overConsumed(result),
      countCell(result),
      result.convergedMs === null ? 'no (30 s)' : `${(result.convergedMs / 1000).toFixed(1)} s`,
      result.passed ? 'pass' : 'FAIL',
    ];
    return `| ${cells.join(' | ')} |`;
  });
  return [
    `Latest run (\`${document.command}\`, ${document.started_at.slice(0, 10)}; counts are Redis's month count vs. the ` +
      `2xx evals the load generator saw; ${document.passed ? 'every invariant held' : 'SOME INVARIANTS FAILED'}):`,
    '',
    '| # | scenario | injected | requests | 2xx / 503 / other | lost writes | usage lost | over-consumed | count error | converged | invariants |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
