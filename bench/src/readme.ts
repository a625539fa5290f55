/** `npm run bench:readme`: the README's benchmark tables, made from bench/results/<mode>.json. */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { log, root } from './harness.ts';
import { withBenchSections } from './readme-sections.ts';

const file = join(root, 'README.md');
const { readme, missing } = withBenchSections(readFileSync(file, 'utf8'));
for (const name of missing) log(`no bench/results/${name}.json yet: its README section is left as it is`);
writeFileSync(file, readme);
log('README benchmark sections updated');
