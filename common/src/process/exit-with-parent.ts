/**
 * Ends this process (with SIGTERM, so its own shutdown runs) once the process that started it is gone.
 * `npm start` runs as a tree (npm, the starter, admin, worker, gateway); whatever ends the top of the tree,
 * a terminal's Ctrl-C or a supervisor signalling only npm's PID, the rest must not linger on the ports.
 */
export function exitWithParent(checkEveryMs = 500): void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid !== parent) process.kill(process.pid, 'SIGTERM');
  }, checkEveryMs);
  timer.unref();
}
