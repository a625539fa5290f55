import { toTimestamp } from '../clock.ts';
import type { RedisClient } from '../redis/connect.ts';
import type { RedisKeys } from '../redis/keys.ts';
import type { Arrangement } from './arrangement.ts';
import { GRACE_PERIOD_MS, periodOf } from './period.ts';

export type EvalWarn = '80' | '100' | 'grace';

/** Values for the X-Svc-Eval-* headers; null when the organization has no monthly cap. */
export interface EvalUsageHeaders {
  limit: number;
  used: number;
  warn: EvalWarn | null;
  /** The arrangement's blocking flag, which `warn` depends on (over the limit: `grace` when blocking). */
  blocking: boolean;
}

/** The month's counters as Redis keeps them. */
export interface UsageCounters {
  count: number;
  /** ms since the epoch; null until the count reaches the limit. */
  firstOverAtMs: number | null;
}

/** SPEC.md part 2, "Usage record (current month)". */
export interface UsageRecord {
  gated: boolean;
  reason: 'unlimited' | null;
  period: string;
  count: number;
  limit: number | null;
  plan: string | null;
  blocking: boolean;
  warn: EvalWarn | null;
  allowed: boolean;
  first_over_at: string | null;
  blocked_at: string | null;
}

type Cap = Pick<Arrangement, 'evalLimit' | 'blocking'>;

/** first_over_at counts only while the count is at or over the (current) limit; a raised limit clears it. */
function effectiveFirstOverAt(cap: Cap, counters: UsageCounters): number | null {
  if (cap.evalLimit === null || counters.count < cap.evalLimit) return null;
  return counters.firstOverAtMs;
}

/** Evals stop: blocking, over the limit, and the 7-day grace period after first_over_at has passed. */
function evalsStopped(cap: Cap, counters: UsageCounters, nowMs: number): boolean {
  const firstOverAt = effectiveFirstOverAt(cap, counters);
  return cap.blocking && firstOverAt !== null && nowMs >= firstOverAt + GRACE_PERIOD_MS;
}

const reachedEightyPercent = (count: number, limit: number) => count * 100 >= limit * 80;

/**
 * `X-Svc-Eval-Warn` (DESIGN.md §3): `80` at >= 80%, `100` at the limit (and over it when not blocking),
 * `grace` over the limit when blocking, in or past the grace period.
 */
export function headerWarn(cap: Cap, count: number, stopped = false): EvalWarn | null {
  if (cap.evalLimit === null) return null;
  if (stopped || (cap.blocking && count > cap.evalLimit)) return 'grace';
  if (count >= cap.evalLimit) return '100';
  if (reachedEightyPercent(count, cap.evalLimit)) return '80';
  return null;
}

/**
 * The headers of an answer that is not counted after all (a 304: refunded): the month's count without it. Its
 * gate call counted it, so the headers it returned include it.
 */
export function uncountedUsage(usage: EvalUsageHeaders): EvalUsageHeaders {
  const used = Math.max(0, usage.used - 1);
  return { ...usage, used, warn: headerWarn({ evalLimit: usage.limit, blocking: usage.blocking }, used) };
}

/** Usage `warn` follows SPEC.md part 3's state table: `100` through the grace period, `grace` once evals stop. */
export function usageWarn(cap: Cap, counters: UsageCounters, nowMs: number): EvalWarn | null {
  if (cap.evalLimit === null) return null;
  if (evalsStopped(cap, counters, nowMs)) return 'grace';
  if (counters.count >= cap.evalLimit) return '100';
  if (reachedEightyPercent(counters.count, cap.evalLimit)) return '80';
  return null;
}

export function usageRecord(arrangement: Arrangement, counters: UsageCounters, nowMs: number): UsageRecord {
  const gated = arrangement.evalLimit !== null;
  const blocking = gated && arrangement.blocking;
  const firstOverAt = effectiveFirstOverAt(arrangement, counters);
  return {
    gated,
    reason: gated ? null : 'unlimited',
    period: periodOf(nowMs),
    count: counters.count,
    limit: arrangement.evalLimit,
    plan: arrangement.plan,
    blocking,
    warn: usageWarn(arrangement, counters, nowMs),
    allowed: !evalsStopped(arrangement, counters, nowMs),
    first_over_at: firstOverAt === null ? null : toTimestamp(firstOverAt),
    blocked_at: firstOverAt === null || !blocking ? null : toTimestamp(firstOverAt + GRACE_PERIOD_MS),
  };
}

/** The counters of the UTC month containing `nowMs`; zero when the month has no evals yet. */
export async function readUsageCounters(
  redis: Pick<RedisClient, 'hmget'>,
  keys: Pick<RedisKeys, 'evalUsage'>,
  organizationId: string,
  nowMs: number,
): Promise<UsageCounters> {
  const [count, firstOverAt] = await redis.hmget(
    keys.evalUsage(organizationId, periodOf(nowMs)),
    'count',
    'first_over_at',
  );
  return {
    count: count ? Number(count) : 0,
    firstOverAtMs: firstOverAt ? Number(firstOverAt) : null,
  };
}

/** The usage record of the month containing `nowMs`. */
export async function currentUsage(
  redis: Pick<RedisClient, 'hmget'>,
  keys: Pick<RedisKeys, 'evalUsage'>,
  organizationId: string,
  arrangement: Arrangement,
  nowMs: number,
): Promise<UsageRecord> {
  return usageRecord(arrangement, await readUsageCounters(redis, keys, organizationId, nowMs), nowMs);
}
