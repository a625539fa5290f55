import { sleep } from './http.ts';
import { verify } from './invariants.ts';
import { createEvalLog, startLoad } from './load.ts';
import { verifyMetered, type MeteredFindings } from './metered-invariants.ts';
import { startMeteredLoad } from './metered-load.ts';
import { verifyCredits, type CreditFindings } from './credit-invariants.ts';
import {
  allowanceOf,
  createFaultOrganization,
  FAULT_CREDIT_TOTAL,
  ROLLOVER_MAX,
  ROLLOVER_ROW_ALLOWANCE,
} from './organization.ts';
import { placePeriodBoundary } from './rollover-boundary.ts';
import { verifyRollover, type RolloverFindings } from './rollover-invariants.ts';
import type { Scenario, Stack } from './scenarios.ts';
import { isSuccess, startWriter } from './writer.ts';

export const EVALS_PER_SECOND = 200;
/** Metered rows: 10 consumes a second per subscriber reach the limit (40) about two seconds after a 10 s outage. */
const CONSUMES_PER_SECOND = 40;
const REPORTS_PER_SECOND = 20;
const METERED_SUBSCRIBERS = 4;
/** Rounds of sending unacknowledged reports again once everything is back, a second apart. */
const REPORT_RETRIES = 10;
const REPORT_RETRY_BOUND_MS = 30_000;
const STEADY_BEFORE_MS = 2000;
/**
 * Rollover rows: the period boundary, counted from its placement (half a second for the placing writes), so about
 * a second after the steady spell that opens the load: the worker is killed just before it.
 */
const ROLLOVER_BOUNDARY_AFTER_MS = 500 + STEADY_BEFORE_MS + 1000;
const LOAD_AFTER_RECOVERY_MS = 3000;
const WRITE_EVERY_MS = 200;
/** Bounds for one scenario's load and writes: far beyond what any scenario needs. */
const MAX_SCENARIO_SECONDS = 60;
const REVOCATION_RETRIES = 10;

export interface Tally {
  total: number;
  ok: number;
  unavailable: number;
  /** Everything else by status or failure code (401 of the revoked key, ECONNREFUSED of a dead gateway, ...). */
  other: Record<string, number>;
}

export interface ScenarioResult {
  scenario: string;
  injected: string;
  passed: boolean;
  evals: Tally;
  writes: Tally;
  lostWrites: number;
  count: { expected: number; allowedExtra: number; actual: number | null; error: number | null; rule: string };
  convergedMs: number | null;
  /** From injecting the fault until everything it broke was running again. */
  faultSeconds: number;
  failures: string[];
  notes: string[];
  /** Metered rows only (consumes and reports running). */
  metered?: MeteredFindings;
  /** Credits rows only: what the credits gave against what the consumes past the allowance took. */
  credits?: CreditFindings;
  /** Rollover rows only: the rollover credits made at the boundary and what was spent across it. */
  rollover?: RolloverFindings;
}

function tally(answers: { status: number | null; failure: string | null }[]): Tally {
  const result: Tally = { total: answers.length, ok: 0, unavailable: 0, other: {} };
  for (const { status, failure } of answers) {
    if (isSuccess(status)) result.ok++;
    else if (status === 503) result.unavailable++;
    else {
      const key = status === null ? (failure ?? 'no answer') : String(status);
      result.other[key] = (result.other[key] ?? 0) + 1;
    }
  }
  return result;
}

/**
 * One scenario on a fresh organization: warm both gateways, start the eval load and the writer (and for a metered row
 * consumes and reports), let the scenario break something and recover, keep the load on a little, stop it, then check
 * every invariant.
 */
export async function runScenario(stack: Stack, scenario: Scenario, index: number): Promise<ScenarioResult> {
  const { services } = stack;
  await stack.postgres.start();
  await stack.redis.start();
  await services.ensureUp();
  const urls = services.gatewayUrls;
  const org = await createFaultOrganization(
    stack.appUrl,
    urls[0]!,
    `Faults ${index + 1} ${scenario.name}`,
    scenario.metered || scenario.rollover,
    scenario.credits,
    scenario.rollover,
  );
  const evals = createEvalLog(org, urls);
  for (let g = 0; g < urls.length; g++) {
    for (const subscriber of org.subscribers) await evals.evaluate(g, subscriber, 'check');
    await evals.evaluate(g, org.subscribers[0]!, 'check', true);
  }

  const meteredSubscribers = org.subscribers.slice(0, METERED_SUBSCRIBERS);
  const placed = { boundaryAt: scenario.rollover ? Date.now() + ROLLOVER_BOUNDARY_AFTER_MS : null };
  if (placed.boundaryAt !== null)
    await placePeriodBoundary(stack.pool, urls[0]!, org, meteredSubscribers, placed.boundaryAt);
  const load = startLoad(evals, org.subscribers, urls.length, EVALS_PER_SECOND, MAX_SCENARIO_SECONDS);
  const writer = startWriter(org, urls, { intervalMs: WRITE_EVERY_MS, maxWrites: 400, maxSeconds: MAX_SCENARIO_SECONDS, firstValue: 1000 });
  const metered = scenario.metered
    ? startMeteredLoad(org, evals, urls, meteredSubscribers, {
        consumesPerSecond: CONSUMES_PER_SECOND,
        reportsPerSecond: REPORTS_PER_SECOND,
        maxSeconds: MAX_SCENARIO_SECONDS,
      })
    : null;
  let faultFrom = Date.now();
  let injected;
  try {
    await sleep(STEADY_BEFORE_MS);
    faultFrom = Date.now();
    injected = await scenario.inject(stack, writer, placed);
    writer.redirect(org.subscribers.slice(4));
    await sleep(LOAD_AFTER_RECOVERY_MS);
  } finally {
    await writer.stop();
    await load.stop();
    await metered?.stop();
  }
  // A revocation refused during the fault (503, or sent to a dead process) is retried once all is back.
  for (let attempt = 0; attempt < REVOCATION_RETRIES && !writer.records.some((w) => w.kind === 'revoke' && isSuccess(w.status)); attempt++) {
    if (attempt > 0) await sleep(1000);
    await writer.revoke();
  }

  // As the SDK does: a report without a 2xx is sent again under its key once the service is back.
  await metered?.retryUnacknowledged(REPORT_RETRIES, REPORT_RETRY_BOUND_MS);

  // The metered figures first: their reads are evals, and the count check that follows must see them too.
  const verifyStarted = Date.now();
  const meteredCheck = metered
    ? await verifyMetered(
        evals,
        urls.length,
        evals.records.filter((e) => e.route === 'consume'),
        metered.reports,
        meteredSubscribers,
        scenario.rollover ? ROLLOVER_ROW_ALLOWANCE : allowanceOf(scenario.credits),
        scenario.credits ? FAULT_CREDIT_TOTAL : scenario.rollover ? ROLLOVER_MAX : 0,
        !scenario.rollover,
      )
    : null;
  const rolloverCheck =
    placed.boundaryAt !== null && meteredCheck
      ? await verifyRollover(
          stack.pool,
          org,
          meteredSubscribers,
          evals.records.filter((e) => e.route === 'consume'),
          placed.boundaryAt,
          meteredCheck.findings.finalUsed,
        )
      : null;
  const creditsCheck =
    scenario.credits && meteredCheck
      ? await verifyCredits(
          org,
          urls,
          meteredSubscribers,
          meteredCheck.findings.finalUsed,
          meteredCheck.findings.overConsumed,
        )
      : null;
  const findings = await verify({
    org,
    evals,
    writes: writer.records,
    gatewayUrls: urls,
    pool: stack.pool,
    countRule: injected.countRule,
    postgresOutage: injected.postgresOutage,
  });
  for (const check of [creditsCheck, rolloverCheck]) {
    if (!check) continue;
    findings.failures.push(...check.failures);
    findings.notes.push(...check.notes);
  }
  if (meteredCheck) {
    findings.failures.push(...meteredCheck.failures);
    findings.notes.push(...meteredCheck.notes);
    // Both waits count from the end of the load: the metered one came first, the others after it.
    findings.convergedMs =
      findings.convergedMs === null || meteredCheck.convergedAt === null
        ? null
        : meteredCheck.convergedAt - verifyStarted + findings.convergedMs;
  }
  const revocations = writer.records.filter((w) => w.kind === 'revoke');
  const during = <T extends { startedAt: number }>(records: T[]) => records.filter((r) => r.startedAt >= faultFrom && r.startedAt < injected.recoveredAt);
  const duringWrites = tally(during(writer.records));
  const duringEvals = tally(during(evals.records));
  findings.notes.push(
    `during the fault (${((injected.recoveredAt - faultFrom) / 1000).toFixed(1)} s): writes ${duringWrites.ok}/${duringWrites.unavailable}/${duringWrites.total - duringWrites.ok - duringWrites.unavailable}, ` +
      `evals ${duringEvals.ok}/${duringEvals.unavailable}/${duringEvals.total - duringEvals.ok - duringEvals.unavailable} (2xx/503/other)`,
    `revocation attempts: ${revocations.map((w) => w.status ?? w.failure).join(', ')}`,
    `fail-open evals (2xx without eval headers): ${evals.records.filter((e) => isSuccess(e.status) && !e.metered).length}`,
  );
  return {
    scenario: scenario.name,
    injected: scenario.injected,
    passed: findings.failures.length === 0,
    evals: tally(evals.records),
    writes: tally(writer.records),
    lostWrites: findings.lostWrites,
    count: findings.count,
    convergedMs: findings.convergedMs,
    faultSeconds: Math.round((injected.recoveredAt - faultFrom) / 100) / 10,
    failures: findings.failures,
    notes: findings.notes,
    ...(meteredCheck ? { metered: meteredCheck.findings } : {}),
    ...(creditsCheck ? { credits: creditsCheck.findings } : {}),
    ...(rolloverCheck ? { rollover: rolloverCheck.findings } : {}),
  };
}
