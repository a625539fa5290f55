import { freePort, startNode, waitFor, type Started } from '../../../gateway/test/processes.ts';
import { onCleanup, track } from './children.ts';

/** Lines per batch of the services' imports: the import row's kill (import-kill.ts) lands between many. */
export const IMPORT_FAULT_BATCH = 200;

/** One service process (admin, worker or a gateway) that a scenario may kill and start again on the same port. */
export interface Service {
  name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** SIGKILL: no shutdown hook runs, whatever was in flight is cut. */
  kill9(): Promise<void>;
  running(): boolean;
  output(): string;
  pid(): number | null;
}

export interface Services {
  admin: Service;
  worker: Service;
  gateways: Service[];
  adminUrl: string;
  gatewayUrls: string[];
  /** Starts whatever is not running (a previous scenario's victim that failed to come back). */
  ensureUp(): Promise<void>;
}

/** Generous: on a loaded machine a tsx start can take well over the tests' 20 s (over a minute at a load of 25). */
const START_BOUND_MS = 180_000;
const healthy = (url: string) => waitFor(async () => (await fetch(`${url}/healthz`)).ok, `${url}/healthz`, START_BOUND_MS);

const exited = (started: Started) => new Promise<void>((resolve) => {
  if (started.child.exitCode !== null || started.child.signalCode !== null) return resolve();
  started.child.once('exit', () => resolve());
});

function service(name: string, script: string, env: Record<string, string>, ready: (started: Started) => Promise<void>): Service {
  let current: Started | null = null;
  const running = () => current !== null && current.child.exitCode === null && current.child.signalCode === null;
  return {
    name,
    running,
    output: () => current?.output() ?? '',
    pid: () => (running() ? (current?.child.pid ?? null) : null),
    async start() {
      if (running()) return;
      // EXIT_WITH_PARENT: should this run itself be killed, its services do not outlive it.
      current = startNode(script, { ...env, EXIT_WITH_PARENT: String(process.pid) });
      track(current.child.pid, name);
      const started = current;
      await Promise.race([
        ready(started),
        exited(started).then(() => {
          throw new Error(`${name} exited while starting:\n${started.output()}`);
        }),
      ]);
    },
    async stop() {
      await current?.stop();
    },
    async kill9() {
      if (!current || !running()) return;
      const done = exited(current);
      process.kill(current.child.pid!, 'SIGKILL');
      await done;
    },
  };
}

export async function startServices(baseEnv: Record<string, string>): Promise<Services> {
  const adminPort = await freePort();
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  // Imports in small batches under a short lease: the import row's kill lands mid-import and resumes in seconds.
  const env = {
    ...baseEnv,
    ADMIN_PORT: String(adminPort),
    ADMIN_URL: adminUrl,
    LOG_LEVEL: 'warn',
    IMPORT_BATCH_SIZE: String(IMPORT_FAULT_BATCH),
    IMPORT_LEASE_MS: '3000',
  };
  const admin = service('admin', 'admin/src/server.ts', env, () => healthy(adminUrl));
  const worker = service('worker', 'admin/src/worker.ts', env, (started) =>
    waitFor(async () => started.output().includes('job kinds and the outbox relay'), 'the worker', START_BOUND_MS),
  );
  const gatewayUrls: string[] = [];
  const gateways: Service[] = [];
  for (let i = 0; i < 2; i++) {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    gatewayUrls.push(url);
    gateways.push(service(`gateway-${i + 1}`, 'gateway/src/server.ts', { ...env, GATEWAY_PORT: String(port) }, () => healthy(url)));
  }
  const all = [admin, worker, ...gateways];
  onCleanup(
    async () => {
      await Promise.all(all.map((s) => s.stop()));
    },
    () => {
      for (const pid of all.map((s) => s.pid())) if (pid) process.kill(pid, 'SIGTERM');
    },
  );
  const services: Services = {
    admin,
    worker,
    gateways,
    adminUrl,
    gatewayUrls,
    async ensureUp() {
      await admin.start();
      await Promise.all([worker.start(), ...gateways.map((g) => g.start())]);
    },
  };
  await services.ensureUp();
  return services;
}
