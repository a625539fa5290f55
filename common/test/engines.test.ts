import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const read = (path: string) => JSON.parse(readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8'));

interface LockedPackage {
  version?: string;
  engines?: { node?: string };
  optional?: boolean;
}

/** The lowest Node of each alternative the range names: `^20.19.0 || >=22.13.0` promises 20.19.0 and 22.13.0. */
const lowestOfEach = (range: string): string[] =>
  range.split('||').map((alternative) => semver.minVersion(alternative.trim())!.version);

describe('the Node versions package.json promises', () => {
  const promised: string = read('package.json').engines.node;
  const lock = read('package-lock.json') as { packages: Record<string, LockedPackage> };

  it('names Node 20 and Node 22', () => {
    expect(lowestOfEach(promised).map((version) => semver.major(version))).toEqual([20, 22]);
  });

  // `npm ci` warns EBADENGINE for any installed package whose engines exclude the running Node; an optional
  // package that does not fit is skipped without a word.
  it('are supported by every package npm ci installs (no EBADENGINE)', () => {
    const unsupported = Object.entries(lock.packages).flatMap(([path, entry]) => {
      const range = entry.engines?.node;
      if (!range || entry.optional || path === '') return [];
      return lowestOfEach(promised)
        .filter((node) => !semver.satisfies(node, range))
        .map((node) => `${path}@${entry.version} wants node ${range}, not ${node}`);
    });
    expect(unsupported).toEqual([]);
  });

  it('include every Node the SDK promises to its users as far as its own dependencies go', () => {
    const sdkRange: string = read('sdk/package.json').engines.node;
    for (const dependency of Object.keys(read('sdk/package.json').dependencies)) {
      const range = lock.packages[`node_modules/${dependency}`]?.engines?.node;
      if (range) expect(semver.subset(sdkRange, range), `${dependency} wants ${range}`).toBe(true);
    }
  });
});
