/** UTC months: the period every eval count belongs to. */

export const GRACE_PERIOD_MS = 7 * 24 * 60 * 60 * 1000;

/** How long a month's usage hash outlives the month (kept for late refunds and inspection). */
const USAGE_RETENTION_MS = 35 * 24 * 60 * 60 * 1000;

let cachedPeriod = { startMs: 0, endMs: -1, period: '' };

/** `YYYY-MM` of the UTC month that contains `nowMs` (remembers the last month: every eval asks). */
export function periodOf(nowMs: number): string {
  if (nowMs >= cachedPeriod.startMs && nowMs < cachedPeriod.endMs) return cachedPeriod.period;
  const now = new Date(nowMs);
  const period = now.toISOString().slice(0, 7);
  const startMs = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  cachedPeriod = { startMs, endMs: nextPeriodStartMs(nowMs), period };
  return period;
}

/** 00:00:00.000 UTC on the first day of the month after the one containing `nowMs`. */
export function nextPeriodStartMs(nowMs: number): number {
  const now = new Date(nowMs);
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
}

/**
 * How long from `nowMs` the usage hash of its month lives: relative, because the app clock (not Redis's)
 * decides the month, and the two need not agree (tests run any month).
 */
export function usageTtlMs(nowMs: number): number {
  return nextPeriodStartMs(nowMs) + USAGE_RETENTION_MS - nowMs;
}

/** `YYYY-MM-DD` of the UTC day that contains `nowMs`. */
export function dayOf(nowMs: number): string {
  return new Date(nowMs).toISOString().slice(0, 10);
}

/** 00:00:00.000 UTC on the first day of the month containing `nowMs`. */
export function periodStartMs(nowMs: number): number {
  const now = new Date(nowMs);
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
}

/** The `count` UTC months ending with the one containing `nowMs`, newest first. */
export function periodsEndingAt(nowMs: number, count: number): string[] {
  const now = new Date(nowMs);
  return Array.from({ length: count }, (_, back) =>
    new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - back, 1)).toISOString().slice(0, 7),
  );
}
