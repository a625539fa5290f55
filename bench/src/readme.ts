/** `npm run bench:readme`: the README's benchmark tables, made from bench/results/<mode>.json. */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { log, root } from './harness.ts';
import { renderMemory, type MemoryResult } from './modes/memory.ts';
import { renderPinned, type PinnedResult } from './modes/pinned.ts';
import { renderProfile, type ProfileResult } from './modes/profile.ts';
import { renderScale, type ScaleResult } from './modes/scale.ts';
import { renderThroughput, type ThroughputResult } from './modes/throughput.ts';
import { readResult, replaceReadmeSection } from './results.ts';

const file = join(root, 'README.md');
let readme = readFileSync(file, 'utf8');
const sections: [string, string | null][] = [
  ['throughput', ((r) => r && renderThroughput(r))(readResult<ThroughputResult>('throughput'))],
  ['memory', ((r) => r && renderMemory(r))(readResult<MemoryResult>('memory'))],
  ['pinned', ((r) => r && renderPinned(r))(readResult<PinnedResult>('pinned'))],
  ['scale', ((r) => r && renderScale(r))(readResult<ScaleResult>('scale'))],
  ['profile', ((r) => r && renderProfile(r))(readResult<ProfileResult>('profile'))],
];
for (const [name, content] of sections) {
  if (content === null) {
    log(`no bench/results/${name}.json yet: its README section is left as it is`);
    continue;
  }
  readme = replaceReadmeSection(readme, name, content);
}
writeFileSync(file, readme);
log('README benchmark sections updated');
