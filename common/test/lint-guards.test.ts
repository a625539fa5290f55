import { execFile } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify, stripVTControlCharacters } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * `npm run lint` guards the layering (dependency-cruiser) and dead code (knip). Each probe breaks one rule in a
 * copy of the repository and runs the same npm scripts there: the working tree is never touched, so a lint or
 * test run beside this one sees nothing of it.
 */
const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

const ROUTE = 'admin/src/features/members/routes.ts';
const OTHER_FEATURES_STORE = 'admin/src/features/plans/store.ts';
const MODULE = 'admin/src/features/shared/pagination.ts';
const UNUSED_EXPORT = 'lintGuardProbe';

let copy: string;
let layers: Promise<{ exitCode: number; stdout: string }>;
let unused: Promise<{ exitCode: number; stdout: string }>;

/** Runs `npm run <script> -- <args>` in the copy; a failing lint exits non-zero, and its report is what counts. */
async function npmRun(script: string, args: string[]): Promise<{ exitCode: number; stdout: string }> {
  try {
    const { stdout } = await run('npm', ['run', '--silent', script, '--', ...args], {
      cwd: copy,
      maxBuffer: 64 * 1024 * 1024,
    });
    return { exitCode: 0, stdout: stripVTControlCharacters(stdout) };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string };
    // Reporters colour their output where CI=true says a CI log will show it; the report's words are what count.
    return { exitCode: failed.code ?? 1, stdout: stripVTControlCharacters(failed.stdout ?? '') };
  }
}

beforeAll(async () => {
  copy = mkdtempSync(join(tmpdir(), 'lint-guards-'));
  const { stdout } = await run('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
    cwd: root,
    maxBuffer: 16 * 1024 * 1024,
  });
  for (const file of stdout.split('\0')) {
    if (!/\.(ts|tsx|mts|js|cjs|mjs|json|html|lua)$/.test(file) || !existsSync(join(root, file))) continue;
    cpSync(join(root, file), join(copy, file), { recursive: true });
  }
  for (const workspace of ['.', 'common', 'admin', 'gateway', 'sdk', 'console', 'bench', 'contract']) {
    const modules = join(root, workspace, 'node_modules');
    if (existsSync(modules) && existsSync(join(copy, workspace))) {
      symlinkSync(modules, join(copy, workspace, 'node_modules'), 'dir');
    }
  }
  appendFileSync(join(copy, ROUTE), `import '../plans/store.ts';\n`);
  appendFileSync(join(copy, MODULE), `export const ${UNUSED_EXPORT} = 1;\n`);
  // Both checks run at once (each takes seconds); the tests read their reports.
  layers = npmRun('lint:layers', []);
  unused = npmRun('lint:unused', ['--workspace', 'admin', '--reporter', 'json']);
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([layers, unused]);
  if (copy && dirname(copy) === tmpdir()) rmSync(copy, { recursive: true, force: true });
});

describe('npm run lint', () => {
  it('runs the layering rules and the unused-code check', () => {
    const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(scripts.lint).toContain('npm run lint:layers');
    expect(scripts.lint).toContain('npm run lint:unused');
    expect(scripts['lint:layers']).toMatch(/^depcruise /);
    expect(scripts['lint:unused']).toMatch(/^knip\b/);
  });

  it("fails on a route that imports another feature's store", async () => {
    const { exitCode, stdout } = await layers;
    const probe = stdout
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.endsWith(`${ROUTE} → ${OTHER_FEATURES_STORE}`));
    expect(probe.map((line) => line.split(':')[0]).sort()).toEqual([
      'error route-runs-no-sql',
      'error route-talks-to-its-own-feature',
      'error store-belongs-to-its-feature',
    ]);
    expect(exitCode).not.toBe(0);
  }, 60_000);

  it('fails on an unused export', async () => {
    const { exitCode, stdout } = await unused;
    const report = JSON.parse(stdout) as { issues: { file: string; exports?: { name: string }[] }[] };
    const reported = report.issues
      .filter((issue) => issue.file === MODULE)
      .flatMap((issue) => (issue.exports ?? []).map((entry) => entry.name));
    expect(reported).toEqual([UNUSED_EXPORT]);
    expect(exitCode).not.toBe(0);
  }, 60_000);
});
