import type pg from 'pg';
import { converge } from './converge.ts';
import type { EvalRecord } from './load.ts';
import {
  METERED_CONSUMED,
  ROLLOVER_MAX,
  ROLLOVER_ROW_ALLOWANCE,
  type FaultOrganization,
} from './organization.ts';

/** What the rollover row measured (issue 35): one rollover per period, nothing spent twice. */
export interface RolloverFindings {
  /** Per subscriber: the ended period's used, the rollover it made, the new period's used and the rollover's spent. */
  subscribers: Record<string, { endedUsed: number; rollover: number; used: number; rolloverSpent: number }>;
  /** Rollover credits recorded for the period, over all subscribers (must equal the subscribers). */
  rolloverCredits: number;
  /** Consumes allowed beyond both periods' allowance and the rollover, or allowed and then missing from the figures. */
  doubleSpent: number;
}

interface Durable {
  periods: { startMs: number; used: number; covered: number; rollover: number }[];
  rollovers: { id: string; amount: number; spent: number; sourceStartMs: number; effectiveMs: number }[];
}

async function durableOf(pool: pg.Pool, organizationId: string, subscriber: string): Promise<Durable> {
  const periods = await pool.query<{ start_ms: string; used: string; covered: string; rollover: string }>(
    `SELECT (extract(epoch FROM period_start) * 1000)::bigint AS start_ms, used, covered, rollover
     FROM metered_usage WHERE organization_id = $1 AND subscriber_id = $2 AND feature_key = $3
     ORDER BY period_start`,
    [organizationId, subscriber, METERED_CONSUMED],
  );
  const rollovers = await pool.query<{
    id: string;
    amount: string;
    spent: string;
    source_ms: string;
    effective_ms: string;
  }>(
    // What the credit has spent as Postgres knows it: the latest of its own figure and its balances' rows'.
    `SELECT c.id, c.amount, credit_spent_now(c) AS spent, (extract(epoch FROM c.source_period_start) * 1000)::bigint AS source_ms,
       (extract(epoch FROM c.effective_at) * 1000)::bigint AS effective_ms
     FROM credits c JOIN features f ON f.id = c.feature_id
     WHERE c.organization_id = $1 AND c.subscriber_id = $2 AND f.key = $3 AND c.source = 'rollover'`,
    [organizationId, subscriber, METERED_CONSUMED],
  );
  return {
    periods: periods.rows.map((row) => ({
      startMs: Number(row.start_ms),
      used: Number(row.used),
      covered: Number(row.covered),
      rollover: Number(row.rollover),
    })),
    rollovers: rollovers.rows.map((row) => ({
      id: row.id,
      amount: Number(row.amount),
      spent: Number(row.spent),
      sourceStartMs: Number(row.source_ms),
      effectiveMs: Number(row.effective_ms),
    })),
  };
}

/**
 * Once the load is over: what the worker persisted (after its kill and restart) must show, per subscriber, the
 * period that ended at `boundaryAt` and the one that started there, exactly one rollover credit made from the
 * ended period's unused allowance (at most ROLLOVER_MAX), spent only after the new allowance, and every consume
 * allowed within the two allowances and the rollover and present in the figures. `currentUsed`: the new period's
 * used figure every gateway answers (the metered check's); Postgres is read until it agrees.
 */
export async function verifyRollover(
  pool: pg.Pool,
  org: FaultOrganization,
  subscribers: readonly string[],
  consumes: readonly EvalRecord[],
  boundaryAt: number,
  currentUsed: Record<string, { consumed: number }>,
): Promise<{ findings: RolloverFindings; failures: string[]; notes: string[] }> {
  const durable = new Map<string, Durable>();
  let problem = '';
  const settled = await converge(async () => {
    for (const subscriber of subscribers) {
      const figures = await durableOf(pool, org.organizationId, subscriber);
      durable.set(subscriber, figures);
      const current = figures.periods.find((period) => period.startMs === boundaryAt);
      const [rollover] = figures.rollovers;
      if (!current || current.used !== currentUsed[subscriber]?.consumed || !rollover || rollover.spent !== current.covered) {
        problem = `${subscriber}: Postgres holds ${JSON.stringify(figures)}, the gateways answer used ${currentUsed[subscriber]?.consumed}`;
        return false;
      }
    }
    return true;
  });
  const failures: string[] = [];
  if (settled === null) failures.push(`the worker's figures never settled after its restart (${problem})`);

  const findings: RolloverFindings = { subscribers: {}, rolloverCredits: 0, doubleSpent: 0 };
  for (const subscriber of subscribers) {
    const { periods, rollovers } = durable.get(subscriber) ?? { periods: [], rollovers: [] };
    findings.rolloverCredits += rollovers.length;
    const ended = periods.find((period) => period.startMs < boundaryAt);
    const current = periods.find((period) => period.startMs === boundaryAt);
    const endedUsed = ended?.used ?? 0;
    const used = current?.used ?? 0;
    const expected = Math.max(0, Math.min(ROLLOVER_MAX, ROLLOVER_ROW_ALLOWANCE - endedUsed));
    const made = rollovers.filter((credit) => credit.effectiveMs === boundaryAt);
    const rollover = made[0];
    findings.subscribers[subscriber] = {
      endedUsed,
      rollover: rollover?.amount ?? 0,
      used,
      rolloverSpent: rollover?.spent ?? 0,
    };
    if (made.length !== 1 || rollovers.length !== 1)
      failures.push(`${subscriber}: ${rollovers.length} rollover credit(s) recorded, ${made.length} for the new period`);
    if (rollover && (ended === undefined || rollover.sourceStartMs !== ended.startMs))
      failures.push(`${subscriber}: the rollover credit names the period ${rollover.sourceStartMs} as its source`);
    if (rollover && rollover.amount !== expected)
      failures.push(`${subscriber}: rolled over ${rollover.amount}, but the ended period left ${ROLLOVER_ROW_ALLOWANCE - endedUsed} (max ${ROLLOVER_MAX})`);
    if (current && rollover && current.rollover !== rollover.amount)
      failures.push(`${subscriber}: the balance says ro ${current.rollover}, the credit ${rollover.amount}`);
    const rolloverAmount = rollover?.amount ?? 0;
    if (rollover && rollover.spent !== Math.max(0, used - ROLLOVER_ROW_ALLOWANCE))
      failures.push(`${subscriber}: used ${used} of ${ROLLOVER_ROW_ALLOWANCE}, but the rollover gave ${rollover.spent}`);
    const allowed = consumes.filter((c) => c.subscriber === subscriber && c.allowed === true).length;
    const unanswered = consumes.filter(
      (c) => c.subscriber === subscriber && c.status === null && c.failure !== 'ECONNREFUSED',
    ).length;
    const capacity = 2 * ROLLOVER_ROW_ALLOWANCE + rolloverAmount;
    const beyond =
      Math.max(0, allowed - capacity) +
      Math.max(0, endedUsed - ROLLOVER_ROW_ALLOWANCE) +
      Math.max(0, used - ROLLOVER_ROW_ALLOWANCE - rolloverAmount);
    const lost = Math.max(0, allowed - (endedUsed + used));
    findings.doubleSpent += beyond + lost;
    if (beyond > 0) failures.push(`${subscriber}: ${beyond} unit(s) beyond the allowances and the rollover`);
    if (lost > 0)
      failures.push(`${subscriber}: ${allowed} consumes allowed, but the periods hold ${endedUsed} + ${used}: ${lost} could be given again`);
    if (endedUsed + used > allowed + unanswered)
      failures.push(`${subscriber}: used ${endedUsed} + ${used}, but only ${allowed} consumes were allowed (${unanswered} unanswered)`);
  }
  if (findings.doubleSpent > 0) failures.push(`${findings.doubleSpent} unit(s) double-spent across the rollover`);
  return {
    findings,
    failures,
    notes: [
      `rollover: ${findings.rolloverCredits} rollover credit(s) for ${subscribers.length} subscribers; per subscriber ` +
        `(ended used, rolled over, used, rollover spent) ${JSON.stringify(findings.subscribers)}; double-spent ${findings.doubleSpent}`,
    ],
  };
}
