import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { testRedisPrefix } from '../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../test-support/databases.ts';
import { freePort, healthy, serviceEnv, startNode, type Started } from '../../gateway/test/processes.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const consoleDir = fileURLToPath(new URL('..', import.meta.url));
const distDir = join(consoleDir, 'dist');
const distIndex = join(distDir, 'index.html');

/** The newest modification time among the console's sources. */
function newestSource(): number {
  const sources = readdirSync(join(consoleDir, 'src'), { recursive: true, encoding: 'utf8' }).map((file) =>
    join(consoleDir, 'src', file),
  );
  sources.push(join(consoleDir, 'index.html'), join(consoleDir, 'vite.config.ts'));
  return Math.max(...sources.map((file) => statSync(file).mtimeMs));
}

/**
 * What only a development build of the console holds: React's dev JSX runtime (`jsxDEV`, whose calls carry each
 * element's source file) and absolute paths of this checkout. Empty for a production build.
 */
export function devOnlyMarkers(code: string): string[] {
  return ['jsxDEV', root, consoleDir].filter((marker) => code.includes(marker));
}

/** The built scripts of console/dist, by file name. */
export function builtScripts(dir = distDir): Map<string, string> {
  const assets = join(dir, 'assets');
  const files = existsSync(assets) ? readdirSync(assets).filter((file) => file.endsWith('.js')) : [];
  return new Map(files.map((file) => [file, readFileSync(join(assets, file), 'utf8')]));
}

/** A development build left in console/dist (as this helper made under vitest's NODE_ENV=test) is rebuilt. */
function isProductionBuild(): boolean {
  const scripts = [...builtScripts().values()];
  return scripts.length > 0 && scripts.every((code) => devOnlyMarkers(code).length === 0);
}

/**
 * The console is served from console/dist: built when missing, older than its sources or a development build
 * (vite, a few seconds). The build is a production one whatever NODE_ENV the caller has (vite.config.ts).
 */
export function ensureConsoleBuilt(): void {
  if (existsSync(distIndex) && statSync(distIndex).mtimeMs >= newestSource() && isProductionBuild()) return;
  execFileSync('npm', ['run', 'build', '-w', '@ent/console'], { cwd: root, stdio: 'pipe' });
}

export interface Stack {
  /** Where the browser goes: the gateway, which forwards /console and non-eval /org routes to admin. */
  base: string;
  adminUrl: string;
  /** The stack's database as its owner, and its Redis key prefix: for cases that set up data directly. */
  databaseOwnerUrl: string;
  redisPrefix: string;
  /** The last output of admin, the worker and the gateway (for a failed case's record). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Real processes on free ports: admin, worker and one gateway, on a database of this file and the shared Redis
 * under a key prefix of its own. No CONSOLE_URL, as on a first run: invite links point at /console on the host
 * the browser reached, as the gateway forwards it.
 */
export async function startStack(): Promise<Stack> {
  const database: TestDatabase = await createTestDatabase();
  const started: { name: string; process: Started }[] = [];
  const output = () =>
    started.map(({ name, process }) => `===== ${name} =====\n${process.output()}`).join('\n');
  const stop = async () => {
    await Promise.all(started.map(({ process }) => process.stop()));
    await database.drop();
  };
  try {
    const redisPrefix = testRedisPrefix();
    const { env, adminUrl } = await serviceEnv({ database, redisPort: 6379, prefix: redisPrefix });
    const gatewayPort = await freePort();
    const base = `http://127.0.0.1:${gatewayPort}`;
    // The webhook case points the webhook at a receiver of the test on 127.0.0.1.
    const shared = { ...env, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' };
    started.push({ name: 'admin', process: startNode('admin/src/server.ts', shared) });
    await healthy(adminUrl);
    started.push({ name: 'worker', process: startNode('admin/src/worker.ts', shared) });
    const gatewayEnv = { ...shared, GATEWAY_PORT: String(gatewayPort) };
    started.push({ name: 'gateway', process: startNode('gateway/src/server.ts', gatewayEnv) });
    await healthy(base);
    return { base, adminUrl, databaseOwnerUrl: database.ownerUrl, redisPrefix, output, stop };
  } catch (error) {
    const record = output();
    await stop();
    throw new Error(`${(error as Error).message}\n${record.slice(-4000)}`);
  }
}
