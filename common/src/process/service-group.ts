import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface ServiceSpec {
  /** Also the npm script that starts it alone (`npm run <name>`). */
  name: string;
  args: string[];
}

export interface ServiceGroupOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  log: (message: string) => void;
  /**
   * Each line a service writes, with the service's name; without it the services write to this process's own
   * stdout and stderr.
   */
  output?: (name: string, line: string, stream: 'stdout' | 'stderr') => void;
  /** Called once, after the children were asked to stop and have exited (or 3 s passed). */
  exit: (code: number) => void;
}

export interface ServiceGroup {
  children: ChildProcess[];
  /** Every service answered: from now on one that exits leaves the others running. */
  markStarted(): void;
  stopAll(code: number): void;
}

const STOP_GRACE_MS = 3000;

/**
 * `npm start`'s processes. One that exits while the group is starting fails the start, so the rest are stopped.
 * Once all are up, each stands on its own, as separately started processes would (DESIGN.md §2.5: admin gone,
 * the gateway keeps answering evals and writes get 503): the others keep running and nothing is restarted
 * behind the operator's back, who starts it again with `npm run <name>`. When none is left the group exits.
 */
export function startServiceGroup(services: ServiceSpec[], options: ServiceGroupOptions): ServiceGroup {
  const children: ChildProcess[] = [];
  let stopping = false;
  let started = false;
  const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

  const stopAll = (code: number) => {
    if (stopping) return;
    stopping = true;
    for (const child of children) if (!exited(child)) child.kill('SIGTERM');
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      options.exit(code);
    };
    setTimeout(finish, STOP_GRACE_MS).unref();
    void Promise.all(
      children.map((child) => (exited(child) ? null : new Promise((resolve) => child.once('exit', resolve)))),
    ).then(finish);
  };

  for (const { name, args } of services) {
    const output = options.output;
    const child = spawn(process.execPath, args, {
      cwd: options.cwd,
      stdio: output ? ['inherit', 'pipe', 'pipe'] : 'inherit',
      env: options.env,
    });
    if (output) {
      for (const stream of ['stdout', 'stderr'] as const) {
        const lines = createInterface({ input: child[stream]!, crlfDelay: Infinity });
        lines.on('line', (line) => output(name, line, stream));
      }
    }
    // A spawn that fails (EAGAIN, EMFILE) emits 'error' and no 'exit': said and stopped, not an uncaught crash.
    child.once('error', (error) => {
      options.log(`${name} could not be started: ${error.message}`);
      stopAll(1);
    });
    child.once('exit', (code, signal) => {
      if (stopping) return;
      const how = code ?? signal;
      if (!started) {
        options.log(`${name} exited (${how}) while starting; stopping the rest`);
        stopAll(code || 1);
      } else if (children.every(exited)) {
        options.log(`${name} exited (${how}); no service is left running`);
        stopAll(code || 1);
      } else {
        options.log(
          `${name} exited (${how}); the others keep running. Start it again with \`npm run ${name}\``,
        );
      }
    });
    children.push(child);
  }

  return {
    children,
    markStarted: () => {
      started = true;
    },
    stopAll,
  };
}
