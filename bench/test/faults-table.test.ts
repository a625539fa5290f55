import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ScenarioResult } from '../src/faults/matrix.ts';
import { readLatestFaults, renderMarkdown, type FaultsDocument } from '../src/faults/table.ts';

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

const tally = { total: 10, ok: 10, unavailable: 0, other: {} };
const row = (scenario: string, extra: Partial<ScenarioResult> = {}): ScenarioResult => ({
  scenario,
  injected: `${scenario} injected`,
  passed: true,
  evals: tally,
  writes: tally,
  lostWrites: 0,
  count: { expected: 10, allowedExtra: 0, actual: 10, error: 0, rule: 'all' },
  convergedMs: 100,
  faultSeconds: 1,
  failures: [],
  notes: [],
  ...extra,
});

function resultsDir(documents: Record<string, FaultsDocument>): string {
  const root = mkdtempSync(join(tmpdir(), 'faults-table-'));
  roots.push(root);
  mkdirSync(join(root, 'bench', 'results'), { recursive: true });
  for (const [name, document] of Object.entries(documents))
    writeFileSync(join(root, 'bench', 'results', name), JSON.stringify(document));
  return root;
}

describe('the fault matrix the documents show', () => {
  it("is the newest whole run with each scenario's result from a newer FAULTS_ONLY run", () => {
    const metered = row('metered-redis-empty', {
      passed: false,
      metered: {
        consumes: { total: 5, allowed: 4, refused: 1, unavailable: 0, unanswered: 0 },
        reports: { total: 3, acknowledged: 3, attempts: 3 },
        usageLost: 2,
        overConsumed: 0,
        finalUsed: {},
        limit: 4,
      },
    });
    const root = resultsDir({
      'faults-2026-11-24.json': {
        command: 'npm run faults',
        started_at: '2026-11-24T10:00:00.000Z',
        passed: true,
        results: [row('redis-refusing'), row('redis-empty')],
      },
      'faults-2026-11-27-partial.json': {
        command: 'FAULTS_ONLY=redis-empty,metered-redis-empty npm run faults',
        only: ['redis-empty', 'metered-redis-empty'],
        started_at: '2026-11-27T03:00:00.000Z',
        passed: false,
        results: [row('redis-empty', { faultSeconds: 9 }), metered],
      },
    });
    const matrix = readLatestFaults(root)!;
    expect(matrix.results.map((r) => [r.scenario, r.faultSeconds])).toEqual([
      ['redis-refusing', 1],
      ['redis-empty', 9],
      ['metered-redis-empty', 1],
    ]);
    expect(matrix.passed).toBe(false);
    const table = renderMarkdown(matrix);
    expect(table).toContain(
      "Each scenario's latest result: `npm run faults` (2026-11-24: redis-refusing, redis-empty)",
    );
    expect(table).toContain(
      '| 3 | metered-redis-empty | metered-redis-empty injected | 20 | 20 / 0 / 0 | 0 | 2 | 0 |',
    );
    expect(table).toContain(
      '| 1 | redis-refusing | redis-refusing injected | 20 | 20 / 0 / 0 | 0 | n/a | n/a |',
    );
  });

  it('ignores a FAULTS_ONLY run older than the newest whole run', () => {
    const root = resultsDir({
      'faults-2026-11-23-partial.json': {
        command: 'FAULTS_ONLY=redis-empty npm run faults',
        only: ['redis-empty'],
        started_at: '2026-11-23T10:00:00.000Z',
        passed: true,
        results: [row('redis-empty', { faultSeconds: 9 })],
      },
      'faults-2026-11-24.json': {
        command: 'npm run faults',
        started_at: '2026-11-24T10:00:00.000Z',
        passed: true,
        results: [row('redis-empty')],
      },
    });
    const matrix = readLatestFaults(root)!;
    expect(matrix.sources).toBeUndefined();
    expect(matrix.results[0]!.faultSeconds).toBe(1);
  });
});
