/**
 * `npm run bench:readme`: the generated tables of README.md, docs/benchmarks.md and docs/operations.md, made from
 * bench/results/<mode>.json and the newest bench/results/faults-<date>.json.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { log, root } from './harness.ts';
import { readDocuments, withBenchSections } from './readme-sections.ts';

const { documents, missing } = withBenchSections(readDocuments());
for (const name of missing) log(`no results for ${name} yet: its section is left as it is`);
for (const [path, text] of Object.entries(documents)) writeFileSync(join(root, path), text);
log(`generated sections updated in ${Object.keys(documents).join(', ')}`);
