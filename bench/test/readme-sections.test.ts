import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { root } from '../src/harness.ts';
import { withBenchSections } from '../src/readme-sections.ts';

describe("the README's benchmark tables", () => {
  it('are the committed results rendered, untouched by hand (run `npm run bench:readme` when this fails)', () => {
    const readme = readFileSync(`${root}/README.md`, 'utf8');
    const { readme: rendered, missing } = withBenchSections(readme);
    expect(missing).toEqual([]);
    expect(rendered).toBe(readme);
  });
});
