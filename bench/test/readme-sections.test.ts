import { describe, expect, it } from 'vitest';
import { renderThroughput, type ThroughputResult } from '../src/modes/throughput.ts';
import { documentsWithSections, readDocuments, withBenchSections } from '../src/readme-sections.ts';
import { readResult } from '../src/results.ts';

describe('the generated tables of README.md, docs/benchmarks.md and docs/operations.md', () => {
  it('are the committed results rendered, untouched by hand (run `npm run bench:readme` when this fails)', () => {
    const documents = readDocuments();
    const { documents: rendered, missing } = withBenchSections(documents);
    expect(missing).toEqual([]);
    for (const path of documentsWithSections) expect(rendered[path], path).toBe(documents[path]);
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
