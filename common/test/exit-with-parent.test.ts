import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Waits up to 10 s for `pid` to end; kills it if it does not. How long it took, ms. */
async function waitForExit(pid: number): Promise<number> {
  let waitedMs = 0;
  while (alive(pid) && waitedMs < 10_000) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    waitedMs += 100;
  }
  if (alive(pid)) process.kill(pid, 'SIGKILL');
  return waitedMs;
}

const FIXTURE_COMMAND = `node --import ${createRequire(import.meta.url).resolve('tsx')} ${
  new URL('./fixtures/follow-starter-service.ts', import.meta.url).pathname
}`;

/** Runs the fixture service as `npm run svc` with `command` as the script, hands over npm and the service's PID. */
async function serviceUnderNpm(
  command: string,
  check: (npm: ChildProcess, servicePid: number) => Promise<void>,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'follow-starter-'));
  try {
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'follow-starter', private: true, scripts: { svc: command } }),
    );
    const npm = spawn('npm', ['run', '--silent', 'svc'], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
    const [chunk] = (await once(npm.stdout!, 'data')) as [Buffer];
    const servicePid = Number(chunk.toString().trim());
    expect(alive(servicePid)).toBe(true);
    await check(npm, servicePid);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('exitWithParent', () => {
  it('ends a process once the process that started it is killed, so npm start leaves nothing on its ports', async () => {
    const parent = spawn(
      process.execPath,
      ['--import', 'tsx', new URL('./fixtures/exit-with-parent-parent.ts', import.meta.url).pathname],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const [chunk] = (await once(parent.stdout!, 'data')) as [Buffer];
    const childPid = Number(chunk.toString().trim());
    expect(alive(childPid)).toBe(true);

    parent.kill('SIGKILL');
    expect(await waitForExit(childPid)).toBeLessThan(10_000);
  });

  it("runs each service script as npm's own child (exec), so a SIGINT to npm's PID alone reaches the service", () => {
    // npm passes SIGINT to the `sh -c` it runs a script in, and dash waits on for its child: with `exec` the
    // shell becomes the service, and npm's signal reaches it (Ctrl-C in a harness that signals npm alone).
    const scripts = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))
      .scripts as Record<string, string>;
    for (const name of ['start', 'gateway', 'admin', 'worker']) {
      expect(scripts[name], name).toMatch(/(^|; )exec node /);
    }
  });

  it.each(['SIGINT', 'SIGTERM'] as const)(
    'a service run with exec ends when npm alone is sent %s',
    async (signal) => {
      await serviceUnderNpm(`exec ${FIXTURE_COMMAND}`, async (npm, servicePid) => {
        npm.kill(signal);
        expect(await waitForExit(servicePid)).toBeLessThan(10_000);
      });
    },
  );

  it('ends a service run as `npm run <script>` once npm alone is sent SIGTERM (no orphan left on its port)', async () => {
    // Without exec: a shell stands between npm and the service, which follows npm (followStarter).
    await serviceUnderNpm(FIXTURE_COMMAND, async (npm, servicePid) => {
      expect(servicePid).not.toBe(npm.pid);
      npm.kill('SIGTERM');
      expect(await waitForExit(servicePid)).toBeLessThan(10_000);
    });
  });
});
