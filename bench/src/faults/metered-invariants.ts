import { converge } from './converge.ts';
import type { EvalLog, EvalRecord } from './load.ts';
import type { ReportRecord } from './metered-load.ts';
import { METERED_CONSUMED, METERED_LIMIT, METERED_REPORTED } from './organization.ts';

/** What a metered row measured (DESIGN.md §5: usage lost, goal 0; over-consumption, must be 0). */
export interface MeteredFindings {
  consumes: { total: number; allowed: number; refused: number; unavailable: number; unanswered: number };
  reports: { total: number; acknowledged: number; attempts: number };
  /** Usage answered as applied (a consume allowed, a report acknowledged) that the final used figure lacks. */
  usageLost: number;
  /** Consumes answered `allowed: true` beyond the limit, subscriber by subscriber. */
  overConsumed: number;
  /** The final used figures: per subscriber, consumed and reported, as every gateway reads them. */
  finalUsed: Record<string, { consumed: number; reported: number }>;
  limit: number;
}

interface Usage {
  consumed: number;
  reported: number;
}

/**
 * One gateway's used figures of both metered features, per subscriber, from the check of each (through the eval log:
 * a check is an eval, and the count check must see it); what went wrong when a read failed.
 */
async function readUsage(
  evals: EvalLog,
  gateway: number,
  subscribers: string[],
): Promise<Map<string, Usage> | string> {
  const usage = new Map<string, Usage>();
  for (const subscriber of subscribers) {
    const used: number[] = [];
    for (const feature of [METERED_CONSUMED, METERED_REPORTED]) {
      const answer = await evals.evaluate(gateway, subscriber, 'metered-check', false, feature);
      const figure = (answer.body as { used?: unknown } | null)?.used;
      if (answer.status !== 200 || typeof figure !== 'number') {
        return `gateway-${gateway + 1} ${feature} of ${subscriber}: ${answer.status ?? answer.failure} ${JSON.stringify(answer.body).slice(0, 200)}`;
      }
      used.push(figure);
    }
    usage.set(subscriber, { consumed: used[0]!, reported: used[1]! });
  }
  return usage;
}

const sameUsage = (a: Map<string, Usage>, b: Map<string, Usage>) =>
  [...a].every(([s, u]) => b.get(s)?.consumed === u.consumed && b.get(s)?.reported === u.reported);

/**
 * Once the load is over and unacknowledged reports were sent again: the used figures every gateway answers (they
 * must agree and stay put for 2 s), against what the answers promised. Per subscriber: consumed must lie between the
 * consumes allowed and those plus the ones whose answer was lost (never a 503's: that one applied nothing), and within
 * the limit; reported between the acknowledged reports' sum and the sum of all sent.
 */
export async function verifyMetered(
  evals: EvalLog,
  gateways: number,
  consumes: EvalRecord[],
  reports: ReportRecord[],
  subscribers: string[],
  /** The plan's limit (the run writes no metered override). */
  allowance = METERED_LIMIT,
  /** What each subscriber holds in credits on top of it (credits rows), all of it consumable. */
  credits = 0,
  /**
   * false: the consumes span two periods (the rollover row), so the current figure cannot be judged against them
   * here; that row's own check (rollover-invariants.ts) judges them against both periods.
   */
  judgeConsumes = true,
): Promise<{ findings: MeteredFindings; failures: string[]; notes: string[]; convergedAt: number | null }> {
  const failures: string[] = [];
  const seen: { usage: Map<string, Usage> | null; steadySince: number; problem: string | null } = {
    usage: null,
    steadySince: Date.now(),
    problem: null,
  };
  const steadyAt = await converge(async () => {
    const readings = await Promise.all(
      Array.from({ length: gateways }, (_, g) => readUsage(evals, g, subscribers)),
    );
    const problem = readings.find((r): r is string => typeof r === 'string');
    if (problem) {
      seen.problem = problem;
      return false;
    }
    const [first, ...others] = readings as Map<string, Usage>[];
    if (!others.every((other) => sameUsage(first!, other))) {
      seen.problem = 'the gateways read back different used figures';
      return false;
    }
    if (!seen.usage || !sameUsage(seen.usage, first!)) seen.steadySince = Date.now();
    seen.usage = first!;
    return Date.now() - seen.steadySince >= 2000;
  });
  // Converged when the figures last moved: the 2 s of watching them stay put is the check's, not the service's.
  const convergedAt = steadyAt === null ? null : seen.steadySince;
  if (convergedAt === null)
    failures.push(`the used figures never settled on every gateway (${seen.problem ?? 'still moving'})`);

  // The allowance and the credits: a consume allowed beyond both spent something twice.
  const verdict = judgeUsage(consumes, reports, seen.usage, subscribers, allowance + credits, judgeConsumes);
  return { ...verdict, failures: [...failures, ...verdict.failures], convergedAt };
}

/**
 * What the answers promised against the used figures read back (`usage`: null when they never settled), subscriber by
 * subscriber. Pure: the rules of verifyMetered, testable on records made by hand.
 */
export function judgeUsage(
  consumes: EvalRecord[],
  reports: ReportRecord[],
  usage: Map<string, Usage> | null,
  subscribers: string[],
  limit: number,
  judgeConsumes = true,
): { findings: MeteredFindings; failures: string[]; notes: string[] } {
  const failures: string[] = [];
  const notes: string[] = [];

  let usageLost = 0;
  let overConsumed = 0;
  const finalUsed: MeteredFindings['finalUsed'] = {};
  for (const subscriber of subscribers) {
    const mine = consumes.filter((c) => c.subscriber === subscriber);
    const allowed = mine.filter((c) => c.allowed === true).length;
    const unanswered = mine.filter((c) => c.status === null && c.failure !== 'ECONNREFUSED').length;
    const acknowledged = reports
      .filter((r) => r.subscriber === subscriber && r.acknowledged)
      .reduce((s, r) => s + r.delta, 0);
    const sent = reports.filter((r) => r.subscriber === subscriber).reduce((s, r) => s + r.delta, 0);
    const used = usage?.get(subscriber);
    if (judgeConsumes) overConsumed += Math.max(0, allowed - limit);
    if (!used) continue;
    finalUsed[subscriber] = used;
    usageLost += Math.max(0, acknowledged - used.reported);
    if (used.reported < acknowledged)
      failures.push(
        `${subscriber}: reports acknowledged ${acknowledged}, used ${used.reported}: ${acknowledged - used.reported} lost`,
      );
    if (used.reported > sent)
      failures.push(
        `${subscriber}: used ${used.reported}, more than every report sent (${sent}): one was applied twice`,
      );
    if (!judgeConsumes) continue;
    usageLost += Math.max(0, allowed - used.consumed);
    if (used.consumed < allowed)
      failures.push(
        `${subscriber}: ${allowed} consumes allowed, used ${used.consumed}: ${allowed - used.consumed} lost`,
      );
    if (used.consumed > allowed + unanswered)
      failures.push(
        `${subscriber}: used ${used.consumed}, but only ${allowed} consumes were allowed (${unanswered} unanswered): a refused or failed consume was deducted`,
      );
    if (used.consumed > limit)
      failures.push(`${subscriber}: used ${used.consumed} beyond the hard limit ${limit}`);
  }
  if (overConsumed > 0) failures.push(`${overConsumed} consume(s) allowed beyond the limit ${limit}`);
  const unacknowledged = reports.filter((r) => !r.acknowledged);
  if (unacknowledged.length)
    failures.push(`${unacknowledged.length} report(s) never acknowledged, even sent again after recovery`);

  const tally = {
    total: consumes.length,
    allowed: consumes.filter((c) => c.allowed === true).length,
    refused: consumes.filter((c) => c.allowed === false).length,
    unavailable: consumes.filter((c) => c.status === 503).length,
    unanswered: consumes.filter((c) => c.status === null).length,
  };
  const attempts = reports.reduce((sum, r) => sum + r.attempts.length, 0);
  notes.push(
    `metered: consumes ${tally.allowed} allowed / ${tally.refused} refused / ${tally.unavailable} 503 / ${tally.unanswered} unanswered ` +
      `(limit ${limit} per subscriber); reports ${reports.length}, ${attempts - reports.length} sent again; final used ${JSON.stringify(finalUsed)}`,
  );
  return {
    findings: {
      consumes: tally,
      reports: { total: reports.length, acknowledged: reports.length - unacknowledged.length, attempts },
      usageLost,
      overConsumed,
      finalUsed,
      limit,
    },
    failures,
    notes,
  };
}
