import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ScenarioResult, Tally } from './matrix.ts';

const others = (t: Tally) => Object.values(t.other).reduce((sum, n) => sum + n, 0);
/** Metered rows' figures; rows without consumes and reports say n/a. */
const usageLost = (r: ScenarioResult) => (r.metered ? String(r.metered.usageLost) : 'n/a');
/** Credits rows: consumes allowed beyond the allowance and the credits, and the usage that spent something twice. */
const overConsumed = (r: ScenarioResult) =>
  r.metered
    ? `${r.metered.overConsumed}${r.credits ? ` (double-spent ${r.credits.doubleSpent})` : ''}`
    : 'n/a';

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

/**
 * bench/results/faults-<date>.json: written on every run, committed once the fixes have been measured. A run of some
 * scenarios only (FAULTS_ONLY) writes faults-<date>-partial.json, so it never replaces a whole run of the same day.
 */
export function writeResults(root: string, document: Record<string, unknown>, partial = false): string {
  const dir = join(root, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `faults-${new Date().toISOString().slice(0, 10)}${partial ? '-partial' : ''}.json`);
  writeFileSync(file, `${JSON.stringify(document, null, 2)}\n`);
  return file;
}

/** What `npm run faults` writes to bench/results/faults-<date>.json (the fields the documents show). */
export interface FaultsDocument {
  command: string;
  started_at: string;
  passed: boolean;
  results: ScenarioResult[];
  /** The scenarios a FAULTS_ONLY run chose (absent or null: all of them). */
  only?: string[] | null;
  /** A merged matrix only: the runs its rows come from, oldest first. */
  sources?: { command: string; started_at: string; scenarios: string[] }[];
}

/**
 * The matrix as the documents show it: the newest whole run, each of its rows replaced or followed by the same
 * scenario's result from a newer run of some scenarios only (FAULTS_ONLY); null before any run.
 */
export function readLatestFaults(root: string): FaultsDocument | null {
  const dir = join(root, 'bench', 'results');
  if (!existsSync(dir)) return null;
  const documents = readdirSync(dir)
    .filter((name) => /^faults-\d{4}-\d{2}-\d{2}(-partial)?\.json$/.test(name))
    .map((name) => JSON.parse(readFileSync(join(dir, name), 'utf8')) as FaultsDocument)
    .sort((a, b) => a.started_at.localeCompare(b.started_at));
  const whole = documents.filter((d) => !d.only?.length).at(-1);
  if (!whole) return documents.at(-1) ?? null;
  const newer = documents.filter((d) => d.only?.length && d.started_at > whole.started_at);
  if (newer.length === 0) return whole;
  const results = [...whole.results];
  const sourceOf = (d: FaultsDocument) => ({
    command: d.command,
    started_at: d.started_at,
    scenarios: d.results.map((r) => r.scenario),
  });
  for (const document of newer) {
    for (const result of document.results) {
      const at = results.findIndex((r) => r.scenario === result.scenario);
      if (at >= 0) results[at] = result;
      else results.push(result);
    }
  }
  return {
    ...whole,
    results,
    passed: results.every((r) => r.passed),
    sources: [whole, ...newer].map(sourceOf),
  };
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
  const runs = document.sources
    ? `each scenario's latest result: ${document.sources
        .map(
          (source) =>
            `\`${source.command}\` (${source.started_at.slice(0, 10)}: ${source.scenarios.join(', ')})`,
        )
        .join('; ')}`
    : `latest run (\`${document.command}\`, ${document.started_at.slice(0, 10)})`;
  return [
    `${runs[0]!.toUpperCase()}${runs.slice(1)}; counts are Redis's month count vs. the 2xx evals the load generator ` +
      `saw; ${document.passed ? 'every invariant held' : 'SOME INVARIANTS FAILED'}:`,
    '',
    '| # | scenario | injected | requests | 2xx / 503 / other | lost writes | usage lost | over-consumed | count error | converged | invariants |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
