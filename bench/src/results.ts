/** Bench results as data: each mode's latest run in bench/results/<mode>.json, from which the documents' tables are made. */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { root } from './harness.ts';

const resultsDir = join(root, 'bench', 'results');

export interface Machine {
  cpus: number;
  cpuModel: string;
  node: string;
}

const machine = (): Machine => ({
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model ?? 'unknown',
  node: process.version,
});

/** Writes the mode's result (with the machine it ran on) and returns the file's path. */
export function writeResult(mode: string, result: object): string {
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, `${mode}.json`);
  writeFileSync(file, `${JSON.stringify({ ...result, machine: machine() }, null, 2)}\n`);
  return file;
}

export function readResult<T>(mode: string): T | null {
  try {
    return JSON.parse(readFileSync(join(resultsDir, `${mode}.json`), 'utf8')) as T;
  } catch {
    return null;
  }
}

/** Whether the document has the `<!-- bench:NAME -->` ... `<!-- /bench:NAME -->` section. */
export function hasSection(document: string, name: string): boolean {
  return document.includes(`<!-- bench:${name} -->`) && document.includes(`<!-- /bench:${name} -->`);
}

/** Replaces what stands between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->` in a document. */
export function replaceReadmeSection(readme: string, name: string, content: string): string {
  const start = `<!-- bench:${name} -->`;
  const end = `<!-- /bench:${name} -->`;
  const from = readme.indexOf(start);
  const to = readme.indexOf(end);
  if (from < 0 || to < from) throw new Error(`the document has no ${start} ... ${end} section`);
  return `${readme.slice(0, from + start.length)}\n${content}\n${readme.slice(to)}`;
}
