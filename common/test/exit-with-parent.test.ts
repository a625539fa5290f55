import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('exitWithParent', () => {
  it('ends a process once the process that started it is killed, so npm start leaves nothing on its ports', async () => {
    const parent = spawn(process.execPath, ['--import', 'tsx', new URL('./fixtures/exit-with-parent-parent.ts', import.meta.url).pathname], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [chunk] = (await once(parent.stdout!, 'data')) as [Buffer];
    const childPid = Number(chunk.toString().trim());
    expect(alive(childPid)).toBe(true);

    parent.kill('SIGKILL');
    let waitedMs = 0;
    while (alive(childPid) && waitedMs < 10_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      waitedMs += 100;
    }
    if (alive(childPid)) process.kill(childPid, 'SIGKILL');
    expect(waitedMs).toBeLessThan(10_000);
  });
});
