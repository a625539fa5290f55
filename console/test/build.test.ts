import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { builtScripts, devOnlyMarkers } from './stack.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const outDir = mkdtempSync(join(tmpdir(), 'console-build-'));

afterAll(() => rmSync(outDir, { recursive: true, force: true }));

/**
 * `npm run build -w @ent/console` (what `npm run console:build`, `npm start` and the e2e test run) is a production
 * build whatever NODE_ENV its caller has: vitest sets NODE_ENV=test, which used to give React's development
 * build with the build machine's source paths in it. Built into a directory of its own: console/dist is the
 * e2e test's.
 */
describe('the console build', () => {
  it('is a production build under NODE_ENV=test: no jsxDEV, no source paths of this checkout', () => {
    execFileSync('npm', ['run', 'build', '-w', '@ent/console', '--', '--outDir', outDir, '--emptyOutDir'], {
      cwd: root,
      env: { ...process.env, NODE_ENV: 'test' },
      stdio: 'pipe',
    });
    const scripts = builtScripts(outDir);
    expect(scripts.size).toBeGreaterThan(0);
    for (const [file, code] of scripts) expect(devOnlyMarkers(code), file).toEqual([]);
  }, 120_000);
});
