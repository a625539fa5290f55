import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, waitFor } from '../../../gateway/test/processes.ts';
import { onCleanup, track } from './children.ts';

/**
 * A Postgres cluster of the run's own (initdb in a temporary directory, trust auth, 127.0.0.1 on a free
 * port), so "Postgres stopped" never touches the shared local cluster other work depends on. The postmaster
 * is this process's own child (spawned as the postgres user), so its PID is known and it is reaped here.
 */
export interface PrivatePostgres {
  port: number;
  /** The superuser URL of `database` (the owner migrations use). */
  ownerUrl(database: string): string;
  /** The services' restricted role on `database`. */
  appUrl(database: string): string;
  start(): Promise<void>;
  /** Fast shutdown (SIGINT): sessions are cut, nothing is left half-written. */
  stop(): Promise<void>;
  running(): boolean;
  output(): string;
}

function binaries(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  const found = versions.map((version) => join(root, version, 'bin')).find((bin) => existsSync(join(bin, 'initdb')));
  if (!found) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql (install the postgresql package)');
  return found;
}

function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const uid = id('-u');
  const gid = id('-g');
  if (!Number.isInteger(uid) || uid <= 0 || process.getuid?.() !== 0) {
    throw new Error('the private Postgres cluster needs to run as root with a "postgres" user present');
  }
  return { uid, gid };
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = binaries();
  const user = postgresUser();
  const dir = mkdtempSync(join(tmpdir(), 'ent-faults-pg-'));
  chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  const init = spawnSync(join(bin, 'initdb'), ['-D', data, '--auth=trust', '-U', 'postgres', '--no-sync'], {
    ...user,
    cwd: dir,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();

  let child: ChildProcess | null = null;
  let output = '';
  const running = () => child !== null && child.exitCode === null && child.signalCode === null;
  const url = (user: string, database: string) => `postgres://${user}@127.0.0.1:${port}/${database}`;
  const accepts = async () => {
    const client = new pg.Client({ connectionString: url('postgres', 'postgres'), connectionTimeoutMillis: 1000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('SELECT 1');
      return true;
    } finally {
      await client.end().catch(() => {});
    }
  };

  const cluster: PrivatePostgres = {
    port,
    ownerUrl: (database) => url('postgres', database),
    appUrl: (database) => url('entitlements_app', database),
    running,
    output: () => output,
    async start() {
      if (running()) return;
      const settings = ['listen_addresses=127.0.0.1', 'fsync=off', 'max_connections=200', 'unix_socket_directories=' + dir];
      child = spawn(join(bin, 'postgres'), ['-D', data, '-p', String(port), ...settings.flatMap((s) => ['-c', s])], {
        ...user,
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      track(child.pid, 'postgres');
      const append = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-10_000));
      child.stdout?.on('data', append);
      child.stderr?.on('data', append);
      await waitFor(accepts, `private postgres on ${port}`, 30_000);
    },
    async stop() {
      const current = child;
      if (!current || !running()) return;
      const exited = new Promise<void>((resolve) => current.once('exit', () => resolve()));
      current.kill('SIGINT');
      const force = setTimeout(() => current.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(force);
    },
  };

  onCleanup(
    async () => {
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    },
    () => {
      if (running()) child?.kill('SIGQUIT');
      rmSync(dir, { recursive: true, force: true });
    },
  );
  await cluster.start();
  return cluster;
}
