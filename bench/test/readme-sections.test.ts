import { describe, expect, it } from 'vitest';
import { documentsWithSections, readDocuments, withBenchSections } from '../src/readme-sections.ts';

describe('the generated tables of README.md, docs/benchmarks.md and docs/operations.md', () => {
  it('are the committed results rendered, untouched by hand (run `npm run bench:readme` when this fails)', () => {
    const documents = readDocuments();
    const { documents: rendered, missing } = withBenchSections(documents);
    expect(missing).toEqual([]);
    for (const path of documentsWithSections) expect(rendered[path], path).toBe(documents[path]);
  });
});
