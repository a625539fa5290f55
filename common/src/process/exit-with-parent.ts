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
