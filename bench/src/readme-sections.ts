/** The README's benchmark sections, each rendered from its mode's results file (bench/results/<mode>.json). */
import { renderAging, type AgingResult } from './modes/aging.ts';
import { renderInstructions, type InstructionsResult } from './modes/instructions.ts';
import { renderMemory, type MemoryResult } from './modes/memory.ts';
import { renderPinned, type PinnedResult } from './modes/pinned.ts';
import { renderProfile, type ProfileResult } from './modes/profile.ts';
import { renderScale, type ScaleResult } from './modes/scale.ts';
import { renderThroughput, type ThroughputResult } from './modes/throughput.ts';
import { readResult, replaceReadmeSection } from './results.ts';

/** Each section's name and content; null where the mode has no results file yet. */
export function readmeSections(): [string, string | null][] {
  return [
    ['throughput', ((r) => r && renderThroughput(r))(readResult<ThroughputResult>('throughput'))],
    ['memory', ((r) => r && renderMemory(r))(readResult<MemoryResult>('memory'))],
    ['pinned', ((r) => r && renderPinned(r))(readResult<PinnedResult>('pinned'))],
    ['scale', ((r) => r && renderScale(r))(readResult<ScaleResult>('scale'))],
    ['profile', ((r) => r && renderProfile(r))(readResult<ProfileResult>('profile'))],
    ['instructions', ((r) => r && renderInstructions(r))(readResult<InstructionsResult>('instructions'))],
    ['aging', ((r) => r && renderAging(r))(readResult<AgingResult>('aging'))],
  ];
}

/** The README with every section that has results replaced by their rendering, and the names left as they were. */
export function withBenchSections(readme: string): { readme: string; missing: string[] } {
  const missing: string[] = [];
  let updated = readme;
  for (const [name, content] of readmeSections()) {
    if (content === null) missing.push(name);
    else updated = replaceReadmeSection(updated, name, content);
  }
  return { readme: updated, missing };
}
