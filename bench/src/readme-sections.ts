/**
 * The documents' generated sections, each rendered from results files: the full benchmark tables in
 * docs/benchmarks.md (bench/results/<mode>.json), the fault matrix in docs/operations.md (the newest
 * bench/results/faults-<date>.json) and the headline figures in the README.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readLatestFaults, renderMarkdown as renderFaults } from './faults/table.ts';
import { root } from './harness.ts';
import { renderHeadline, type HeadlineInputs } from './headline.ts';
import { renderAging, type AgingResult } from './modes/aging.ts';
import { renderInstructions, type InstructionsResult } from './modes/instructions.ts';
import { renderMemory, type MemoryResult } from './modes/memory.ts';
import { renderCreditsMemory, type CreditsMemoryResult } from './modes/memory-credits.ts';
import { renderConsumeFloor, type ConsumeFloorResult } from './modes/consume-floor.ts';
import { renderCredits, type CreditsResult } from './modes/credits.ts';
import { renderMetering, type MeteringResult } from './modes/metering.ts';
import { renderExport, type ExportResult } from './modes/export.ts';
import { renderImport, type ImportResult } from './modes/import.ts';
import { renderPinned, type PinnedResult } from './modes/pinned.ts';
import { renderProfile, type ProfileResult } from './modes/profile.ts';
import { renderScale, type ScaleResult } from './modes/scale.ts';
import { renderThroughput, type ThroughputResult } from './modes/throughput.ts';
import { hasSection, readResult, replaceReadmeSection } from './results.ts';

/** Every document that holds generated sections, relative to the repository's root. */
export const documentsWithSections = ['README.md', 'docs/benchmarks.md', 'docs/operations.md'];

/** Each section's name and content; null where its results file does not exist yet. */
function readmeSections(): [string, string | null][] {
  const results: HeadlineInputs = {
    throughput: readResult<ThroughputResult>('throughput'),
    pinned: readResult<PinnedResult>('pinned'),
    memory: readResult<MemoryResult>('memory'),
    scale: readResult<ScaleResult>('scale'),
    faults: readLatestFaults(root),
    aging: readResult<AgingResult>('aging'),
    metering: readResult<MeteringResult>('metering'),
    imported: readResult<ImportResult>('import'),
    exported: readResult<ExportResult>('export'),
    credits: readResult<CreditsResult>('credits'),
  };
  const { throughput, memory, pinned, scale, faults, aging, metering, imported, exported, credits } = results;
  return [
    ['headline', renderHeadline(results)],
    ['throughput', throughput && renderThroughput(throughput)],
    ['memory', memory && renderMemory(memory)],
    ['pinned', pinned && renderPinned(pinned)],
    ['scale', scale && renderScale(scale)],
    ['profile', ((r) => r && renderProfile(r))(readResult<ProfileResult>('profile'))],
    ['instructions', ((r) => r && renderInstructions(r))(readResult<InstructionsResult>('instructions'))],
    ['faults', faults && renderFaults(faults)],
    ['aging', aging && renderAging(aging)],
    // Newer than the other modes: until a run has been committed, the section says so rather than stay stale.
    [
      'metering',
      metering ? renderMetering(metering) : 'Not measured yet: `npm run bench -- metering` writes it.',
    ],
    [
      'consume-floor',
      ((r) => (r ? renderConsumeFloor(r) : 'Not measured yet: `npm run bench -- consume-floor` writes it.'))(
        readResult<ConsumeFloorResult>('consume-floor'),
      ),
    ],
    ['import', imported ? renderImport(imported) : 'Not measured yet: `npm run bench -- import` writes it.'],
    ['export', exported ? renderExport(exported) : 'Not measured yet: `npm run bench -- export` writes it.'],
    ['credits', credits ? renderCredits(credits) : 'Not measured yet: `npm run bench -- credits` writes it.'],
    [
      'memory-credits',
      ((r) => (r ? renderCreditsMemory(r) : 'Not measured yet: `npm run bench -- memory-credits` writes it.'))(
        readResult<CreditsMemoryResult>('memory-credits'),
      ),
    ],
  ];
}

/**
 * The documents (path → text) with every section that has results replaced by their rendering, and the names
 * left as they were. A section whose markers are in no document is an error: its figures would go nowhere.
 */
export function withBenchSections(documents: Record<string, string>): {
  documents: Record<string, string>;
  missing: string[];
} {
  const missing: string[] = [];
  const updated = { ...documents };
  for (const [name, content] of readmeSections()) {
    const holders = Object.keys(updated).filter((path) => hasSection(updated[path]!, name));
    if (holders.length === 0) throw new Error(`no document has the <!-- bench:${name} --> section`);
    if (content === null) missing.push(name);
    else for (const path of holders) updated[path] = replaceReadmeSection(updated[path]!, name, content);
  }
  return { documents: updated, missing };
}

/** The documents as they are in the checkout. */
export function readDocuments(): Record<string, string> {
  return Object.fromEntries(
    documentsWithSections.map((path) => [path, readFileSync(join(root, path), 'utf8')]),
  );
}
