import { readFileSync } from 'node:fs';

/**
 * Every process the fault matrix starts, by PID, and what must be undone however the run ends (a
 * SIGSTOPped Redis resumed, a stopped cluster stopped for good, temporary directories removed). Cleanup
 * runs once, from the run's finally block or from a signal; a synchronous pass also runs on exit.
 */
const started: { pid: number; name: string }[] = [];
const asyncCleanups: (() => Promise<void>)[] = [];
const syncCleanups: (() => void)[] = [];

let cleaning: Promise<void> | null = null;

export function track(pid: number | undefined, name: string): number {
  if (!pid) throw new Error(`${name} did not start`);
  started.push({ pid, name });
  if (cleaning) {
    // Started by a scenario still running while the run stops (after a signal): it must not outlive the run.
    process.kill(pid, 'SIGKILL');
    throw new Error(`${name} started while the run was stopping`);
  }
  return pid;
}

/** Registered in order; run in reverse (services before the stores they use). */
export function onCleanup(run: () => Promise<void>, runSync: () => void): void {
  asyncCleanups.push(run);
  syncCleanups.push(runSync);
}

export function cleanupAll(): Promise<void> {
  cleaning ??= (async () => {
    for (const run of [...asyncCleanups].reverse()) {
      await run().catch((error: unknown) =>
        process.stderr.write(`[faults] cleanup step failed: ${String(error)}\n`),
      );
    }
  })();
  return cleaning;
}

/** A PID is gone when signalling it fails with ESRCH; a zombie (exited, not yet reaped) counts as gone. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** What this run started and is still running (an empty list once cleanup has done its work). */
export const leftovers = (): { pid: number; name: string }[] => started.filter(({ pid }) => isAlive(pid));

export const startedCount = () => started.length;

let handlersInstalled = false;
export function installSignalHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      process.stderr.write(`[faults] ${signal}: stopping everything this run started\n`);
      void cleanupAll().finally(() => process.exit(130));
    });
  }
  process.once('exit', () => {
    for (const run of [...syncCleanups].reverse()) {
      try {
        run();
      } catch {
        // best effort: the process is exiting
      }
    }
  });
}
