import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

export interface Started {
  child: ChildProcess;
  output: () => string;
  stop(): Promise<void>;
}

/** A child process of this test, stopped by its PID only. */
export function start(command: string, args: string[], env: Record<string, string>): Started {
  const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)));
  child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)));
  return {
    child,
    output: () => output,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const force = setTimeout(() => child.pid && process.kill(child.pid, 'SIGKILL'), 5000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        if (child.pid) process.kill(child.pid, 'SIGTERM');
      }),
  };
}

export const startNode = (script: string, env: Record<string, string>) => start(process.execPath, ['--import', 'tsx', script], env);

export const startRedis = (port: number) =>
  start('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no', '--daemonize', 'no'], {});

/** Polls until `probe` is true; bounded in attempts and time. */
export async function waitFor(probe: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; attempt < 1000 && Date.now() < deadline; attempt++) {
    if (await probe().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export const healthy = (url: string) => waitFor(async () => (await fetch(`${url}/healthz`)).ok, `${url}/healthz`);
