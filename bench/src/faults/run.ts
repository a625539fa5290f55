/**
 * `npm run faults`: the fault matrix. Starts its own Postgres cluster (initdb in a temporary directory, free
 * port), its own redis-server (append-only file in a temporary directory), admin, worker and two gateways,
 * all on 127.0.0.1; then runs each scenario on a fresh organization under a bounded eval load and write
 * stream, breaks one thing, recovers it, and checks the invariants (nothing committed lost on its way to the
 * gateways, every 2xx write audited, the revoked key refused everywhere, 503 writes never applied, no 5xx
 * but 503, the month's eval count exact). Prints a table, writes bench/results/faults-<date>.json, and
 * exits non-zero when any invariant failed. Everything started is stopped by PID, whatever happens.
 * FAULTS_ONLY=name,name runs a subset (written to faults-<date>-partial.json; the documents show each scenario's
 * latest result).
 */
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { migrateToLatest } from '@ent/common/db/migrate';
import { cleanupAll, installSignalHandlers, leftovers, onCleanup, startedCount } from './children.ts';
import { CONVERGENCE_BOUND_MS } from './converge.ts';
import { EVALS_PER_SECOND, runScenario, type ScenarioResult } from './matrix.ts';
import { startPrivatePostgres } from './postgres.ts';
import { startFaultRedis } from './redis.ts';
import { scenarios, type Stack } from './scenarios.ts';
import { startServices } from './services.ts';
import { renderTable, writeResults } from './table.ts';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const log = (message: string) => process.stdout.write(`[faults] ${message}\n`);

const only = (process.env.FAULTS_ONLY ?? '').split(',').filter(Boolean);
const chosen = scenarios.filter((s) => only.length === 0 || only.includes(s.name));
/** Setup, then two minutes per scenario at most (one takes one to two on a busy machine); never less than 9.5. */
const RUN_BOUND_MS = Math.max(9.5 * 60_000, (3 + 2 * chosen.length) * 60_000);
const results: ScenarioResult[] = [];
let setupError: string | null = null;

installSignalHandlers();
// Over the bound: everything is stopped, the scenarios left fail at once and what was measured is still written; a
// minute later the run ends regardless.
const watchdog = setTimeout(() => {
  process.stderr.write('[faults] the run exceeded its bound; stopping everything\n');
  setupError = `the run exceeded its bound (${RUN_BOUND_MS / 60_000} min)`;
  void cleanupAll();
  setTimeout(() => process.exit(2), 60_000).unref();
}, RUN_BOUND_MS);
watchdog.unref();
const startedAt = Date.now();

try {
  const postgres = await startPrivatePostgres();
  const database = 'ent_faults';
  await migrateToLatest({ ownerUrl: postgres.ownerUrl(database), appUrl: postgres.appUrl(database) });
  const pool = new pg.Pool({
    connectionString: postgres.ownerUrl(database),
    max: 2,
    connectionTimeoutMillis: 2000,
  });
  pool.on('error', () => {});
  onCleanup(
    () => pool.end(),
    () => {},
  );
  const redis = await startFaultRedis();
  log(`postgres on ${postgres.port} (private cluster), redis-server on ${redis.port}`);
  const services = await startServices({
    DATABASE_URL: postgres.appUrl(database),
    DATABASE_OWNER_URL: postgres.ownerUrl(database),
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: `faults${randomBytes(3).toString('hex')}`,
  });
  log(`admin ${services.adminUrl}, gateways ${services.gatewayUrls.join(' ')}`);
  const stack: Stack = { postgres, redis, services, pool, appUrl: postgres.appUrl(database) };

  for (const [index, scenario] of chosen.entries()) {
    log(`${index + 1}/${chosen.length} ${scenario.name}: ${scenario.injected}`);
    const began = Date.now();
    try {
      results.push(await runScenario(stack, scenario, index));
    } catch (error) {
      results.push({
        scenario: scenario.name,
        injected: scenario.injected,
        passed: false,
        evals: { total: 0, ok: 0, unavailable: 0, other: {} },
        writes: { total: 0, ok: 0, unavailable: 0, other: {} },
        lostWrites: 0,
        count: { expected: 0, allowedExtra: 0, actual: null, error: null, rule: 'not measured' },
        convergedMs: null,
        faultSeconds: 0,
        failures: [`the scenario could not run: ${error instanceof Error ? error.message : String(error)}`],
        notes: [],
      });
    }
    const result = results[results.length - 1]!;
    log(
      `   ${result.passed ? 'PASS' : 'FAIL'} in ${((Date.now() - began) / 1000).toFixed(0)} s${result.passed ? '' : `: ${result.failures[0]}`}`,
    );
  }
} catch (error) {
  setupError ??= error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`[faults] setup failed: ${setupError}\n`);
} finally {
  await cleanupAll();
}

const left = leftovers();
const started = startedCount();
process.stdout.write(`\n${renderTable(results)}\n\n`);
process.stdout.write(
  left.length === 0
    ? `processes: all ${started} started by this run are gone\n`
    : `processes LEFT BEHIND: ${left.map((p) => `${p.name} ${p.pid}`).join(', ')}\n`,
);

const gitCommit = (() => {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
})();
const passed =
  setupError === null &&
  left.length === 0 &&
  results.length === chosen.length &&
  results.every((r) => r.passed);
const file = writeResults(
  root,
  {
    command: only.length ? `FAULTS_ONLY=${only.join(',')} npm run faults` : 'npm run faults',
    only: only.length ? only : null,
    started_at: new Date(startedAt).toISOString(),
    seconds: Math.round((Date.now() - startedAt) / 1000),
    git_commit: gitCommit,
    evals_per_second: EVALS_PER_SECOND,
    convergence_bound_ms: CONVERGENCE_BOUND_MS,
    passed,
    setup_error: setupError,
    processes: { started, left_behind: left },
    results,
  },
  only.length > 0,
);
process.stdout.write(`results: ${file}\n${passed ? 'every invariant held' : 'INVARIANTS FAILED'}\n`);
process.exit(passed ? 0 : 1);
