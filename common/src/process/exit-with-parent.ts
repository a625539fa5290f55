import { readFileSync } from 'node:fs';

/**
 * Ends this process (with SIGTERM, so its own shutdown runs) once the process that started it is gone.
 * `npm start` runs as a tree (npm, the starter, admin, worker, gateway); whatever ends the top of the tree,
 * a terminal's Ctrl-C or a supervisor signalling only npm's PID, the rest must not linger on the ports.
 * The spawner passes its PID (`EXIT_WITH_PARENT=<pid>`), so a parent that dies while this process is still
 * starting is noticed too.
 */
export function exitWithParent(parentPid: number = process.ppid, checkEveryMs = 500): void {
  const check = () => {
    if (process.ppid !== parentPid) process.kill(process.pid, 'SIGTERM');
  };
  check();
  setInterval(check, checkEveryMs).unref();
}

/** The parent PID a spawner asked this process to follow, if any. */
export function parentToFollow(env: Record<string, string | undefined> = process.env): number | null {
  const pid = Number(env.EXIT_WITH_PARENT);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

const SHELLS = new Set(['sh', 'dash', 'bash']);

/**
 * The process that started our parent, when our parent is only the `sh -c` npm runs scripts through: a signal
 * sent to npm's PID alone (SIGINT from a supervisor, say) ends npm but not that shell, which waits for us.
 */
export function npmBehindShell(parentPid: number = process.ppid): number | null {
  if (!process.env.npm_lifecycle_event) return null;
  try {
    // npm may also start us itself (no shell between): then its own parent is not npm, and is not followed.
    if (!SHELLS.has(readFileSync(`/proc/${parentPid}/comm`, 'utf8').trim())) return null;
    const stat = readFileSync(`/proc/${parentPid}/stat`, 'utf8');
    const grandparent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return Number.isInteger(grandparent) && grandparent > 1 ? grandparent : null;
  } catch {
    return null;
  }
}

/** Ends this process (SIGTERM) once `pid` no longer exists. */
export function exitWithProcess(pid: number, checkEveryMs = 500): void {
  const check = () => {
    try {
      process.kill(pid, 0);
    } catch {
      process.kill(process.pid, 'SIGTERM');
    }
  };
  setInterval(check, checkEveryMs).unref();
}

/**
 * Ties a service's life to what started it. Under `npm start` that is the starter (`EXIT_WITH_PARENT`). Run as
 * `npm run <script>` (npm, `sh -c`, node), it is npm and its shell: a signal sent to npm's PID alone (a test
 * harness's `child.kill()`, a supervisor) ends npm, and the service must not stay on its port as an orphan.
 * Started any other way (a supervisor, `nohup node …`) nothing is followed.
 */
export function followStarter(script: string, env: Record<string, string | undefined> = process.env): void {
  const parentPid = parentToFollow(env);
  if (parentPid) {
    exitWithParent(parentPid);
    return;
  }
  if (env.npm_lifecycle_event !== script) return;
  exitWithParent(process.ppid);
  const npm = npmBehindShell();
  if (npm) exitWithProcess(npm);
}
