/**
 * `npm start`: Postgres and Redis up, database migrated, admin + worker + gateway running, and a demo
 * organization's full-access key printed the first time. Every line it prints names its source (`[start]`,
 * `[services]`, `[console]`, `[admin]`, `[worker]`, `[gateway]`), the services' JSON log lines shown readably
 * (service-lines.ts).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '@ent/common/config';
import { createDb } from '@ent/common/db/connect';
import { migrateToLatest } from '@ent/common/db/migrate';
import { exitWithParent, exitWithProcess, npmBehindShell } from '@ent/common/process/exit-with-parent';
import { startServiceGroup } from '@ent/common/process/service-group';
import { serviceLine } from '@ent/common/process/service-lines';
import { createOrganization } from '../admin/src/features/provisioning/create-organization.ts';
import { GATEWAY_NODE_FLAGS } from '../gateway/src/runtime-flags.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
// One gateway and one admin on this host: their operations ports (/metrics, detailed /readyz) get the
// conventional numbers unless set, so a local run is observable like a deployment.
process.env.GATEWAY_METRICS_PORT ||= '9464';
process.env.ADMIN_METRICS_PORT ||= '9465';
// DESIGN.md §4's `/metrics` on both public ports, for this machine's own clients (off when run alone).
process.env.PUBLIC_PORT_METRICS ||= 'loopback';
const config = loadConfig();
const log = (message: string) => process.stdout.write(`[start] ${message}\n`);
const printLine = (name: string, line: string, stream: 'stdout' | 'stderr') =>
  (stream === 'stderr' ? process.stderr : process.stdout).write(`${serviceLine(name, line)}\n`);

/** A step's command, each line it prints under its name; resolves to its exit code. */
function runStep(name: string, command: string, args: string[]): Promise<number> {
  const child = spawn(command, args, { cwd: root, stdio: ['inherit', 'pipe', 'pipe'] });
  for (const stream of ['stdout', 'stderr'] as const) {
    createInterface({ input: child[stream], crlfDelay: Infinity }).on('line', (line) =>
      printLine(name, line, stream),
    );
  }
  return new Promise((resolve) => {
    child.once('error', () => resolve(1));
    child.once('close', (code) => resolve(code ?? 1));
  });
}

// INTERNAL_TOKEN is passed through as given. Unset (the default), admin's /internal routes answer loopback peers
// only, so a gateway added later with `npm run gateway` works as DESIGN.md §4 promises, with nothing to copy.

const services = await runStep('services', 'bash', ['scripts/ensure-services.sh']);
if (services !== 0) process.exit(services);

// Admin serves the console from console/dist (answering 503 without it): build it once on a fresh checkout.
if (!existsSync(join(root, 'console', 'dist', 'index.html'))) {
  log('building the console (npm run console:build)');
  const build = await runStep('console', 'npm', ['run', 'console:build']);
  if (build !== 0) {
    process.stderr.write(
      `[start] the console build failed (exit ${build}); fix it, or run \`npm run console:build\` to see why\n`,
    );
    process.exit(build);
  }
}

await migrateToLatest({ ownerUrl: config.databaseOwnerUrl, appUrl: config.databaseUrl });
log('database migrated');

const processes: { name: string; script: string; nodeFlags?: readonly string[]; ready?: string }[] = [
  { name: 'admin', script: 'admin/src/server.ts', ready: `http://127.0.0.1:${config.adminPort}/healthz` },
  { name: 'worker', script: 'admin/src/worker.ts' },
  {
    name: 'gateway',
    script: 'gateway/src/server.ts',
    nodeFlags: GATEWAY_NODE_FLAGS,
    ready: `http://127.0.0.1:${config.gatewayPort}/healthz`,
  },
];

exitWithParent();
const npm = npmBehindShell();
if (npm) exitWithProcess(npm);

const group = startServiceGroup(
  processes.map(({ name, script, nodeFlags = [] }) => ({
    name,
    args: [...nodeFlags, '--import', 'tsx', script],
  })),
  {
    cwd: root,
    env: { ...process.env, EXIT_WITH_PARENT: String(process.pid) },
    log,
    output: printLine,
    exit: (code) => process.exit(code),
  },
);
process.once('SIGINT', () => group.stopAll(0));
process.once('SIGTERM', () => group.stopAll(0));

async function waitReady(url: string): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not become ready`);
}
for (const { ready } of processes) if (ready) await waitReady(ready);
group.markStarted();

const db = createDb(config.databaseUrl, { max: 1 });
try {
  // Only a database without any organization gets the demo one: a name is no identity (a renamed demo would get a
  // second one, an organization someone named "Demo" would hide that none was ever printed).
  const existing = await db
    .selectFrom('organizations')
    .select(db.fn.countAll<string>().as('count'))
    .executeTakeFirstOrThrow();
  if (Number(existing.count) === 0) {
    const created = await createOrganization(db, 'Demo');
    log(`demo organization ${created.organization_id}`);
    log(`full-access API key (shown once, store it now): ${created.api_key}`);
  } else {
    log(
      `${existing.count} organization(s) exist; the demo key was printed when the first was made. ` +
        'New one: npx entctl org create --name NAME --json',
    );
  }
} finally {
  await db.destroy();
}
// `localhost`: browsers accept the Secure session cookie over plain http there (a trustworthy origin).
log(`console: ${config.consoleUrl ?? `http://localhost:${config.gatewayPort}/console`}`);
log(
  `ready: base URL http://127.0.0.1:${config.gatewayPort} (admin on ${config.adminPort}; ` +
    `metrics on ${config.gatewayMetricsPort} and ${config.adminMetricsPort})`,
);
