import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { root } from '../src/harness.ts';
import { renderThroughput, type ThroughputResult } from '../src/modes/throughput.ts';
import { withBenchSections } from '../src/readme-sections.ts';
import { readResult } from '../src/results.ts';

describe("the README's benchmark tables", () => {
  it('are the committed results rendered, untouched by hand (run `npm run bench:readme` when this fails)', () => {
    const readme = readFileSync(`${root}/README.md`, 'utf8');
    const { readme: rendered, missing } = withBenchSections(readme);
    expect(missing).toEqual([]);
    expect(rendered).toBe(readme);
  });
});

describe('the throughput section', () => {
  const committed = readResult<ThroughputResult>('throughput')!;

  it('reports the compiled gateway against the tsx one when the run measured both', () => {
    const withCompiled = {
      ...committed,
      ratios: {
        ...committed.ratios,
        compiledThroughputVsTsx: 1.08,
        compiledCpuVsTsx: 0.93,
        compiledP99VsTsx: 0.97,
      },
    };
    expect(renderThroughput(withCompiled)).toContain(
      'against the same gateway through tsx (`npm start`), both measured in the same rounds: **1.08** of its ' +
        'throughput at **0.93×** its CPU per request and 0.97× its p99',
    );
  });

  it('renders results written before the compiled gateway was measured without that sentence', () => {
    const {
      compiledThroughputVsTsx: _t,
      compiledCpuVsTsx: _c,
      compiledP99VsTsx: _p,
      ...older
    } = committed.ratios;
    expect(renderThroughput({ ...committed, ratios: older })).not.toContain('dist/gateway.js');
  });
});
