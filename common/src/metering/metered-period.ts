import type { MeteredReset } from '../db/database.ts';

/**
 * DESIGN.md §5: the period of a metered feature that contains an instant. Periods are UTC. On the calendar, days start
 * at midnight, weeks on Monday, months on the 1st, years on 1 January. Anchored on a subscription's start, periods
 * start at that instant plus whole days, weeks, months or years; a month anchored on the 31st ends on the last day of
 * a shorter month, and the next one starts on the 31st again (each boundary counts from the anchor, not from the
 * boundary before it, so a short month never moves the anchor).
 */
export interface MeteredPeriod {
  startMs: number;
  /** The next period's start; null for reset "never". */
  endMs: number | null;
  /** Both instants as an answer shows them, when a caller keeps the period to answer with it many times. */
  startIso?: string;
  endIso?: string | null;
}

const DAY_MS = 86_400_000;
const WEEK_MS = 7 * DAY_MS;

/** A balance lives this long in Redis after its period ends, so the worker and late reads still find it. */
export const BALANCE_AFTER_PERIOD_MS = 35 * DAY_MS;

/** How long a balance of a period ending at `endMs` still lives in Redis at `nowMs` (null: its period never ends). */
export const balanceTtlMs = (endMs: number | null, nowMs: number): number | null =>
  endMs === null ? null : Math.max(1, endMs + BALANCE_AFTER_PERIOD_MS - nowMs);

/** From this long after its period's end no drain can write a balance's row again: gone from Redis, a day's margin. */
export const BALANCE_SETTLED_AFTER_PERIOD_MS = BALANCE_AFTER_PERIOD_MS + DAY_MS;

/** Shorter periods first: the tie-break between grants of one limit (DESIGN.md §5). */
export const RESET_ORDER: Record<MeteredReset, number> = { day: 0, week: 1, month: 2, year: 3, never: 4 };

/** Calendar periods start here for reset "never": one period since the epoch. */
const NEVER_CALENDAR_START_MS = 0;

function fixedSteps(anchorMs: number, stepMs: number, nowMs: number): MeteredPeriod {
  const steps = Math.floor((nowMs - anchorMs) / stepMs);
  const startMs = anchorMs + steps * stepMs;
  return { startMs, endMs: startMs + stepMs };
}

const daysInMonth = (year: number, month: number): number =>
  new Date(Date.UTC(year, month + 1, 0)).getUTCDate();

/** `anchor` plus `months` months, on the anchor's day clamped to the month's last day, at the anchor's time of day. */
function addMonthsClamped(anchor: Date, months: number): number {
  const target = new Date(Date.UTC(anchor.getUTCFullYear(), anchor.getUTCMonth() + months, 1));
  const year = target.getUTCFullYear();
  const month = target.getUTCMonth();
  const day = Math.min(anchor.getUTCDate(), daysInMonth(year, month));
  return Date.UTC(
    year,
    month,
    day,
    anchor.getUTCHours(),
    anchor.getUTCMinutes(),
    anchor.getUTCSeconds(),
    anchor.getUTCMilliseconds(),
  );
}

function monthSteps(anchorMs: number, monthsPerStep: number, nowMs: number): MeteredPeriod {
  const anchor = new Date(anchorMs);
  const now = new Date(nowMs);
  const monthsApart =
    (now.getUTCFullYear() - anchor.getUTCFullYear()) * 12 + (now.getUTCMonth() - anchor.getUTCMonth());
  let step = Math.floor(monthsApart / monthsPerStep);
  // The estimate is off by at most one step either way (day and time of day within the month decide).
  while (addMonthsClamped(anchor, step * monthsPerStep) > nowMs) step -= 1;
  while (addMonthsClamped(anchor, (step + 1) * monthsPerStep) <= nowMs) step += 1;
  return {
    startMs: addMonthsClamped(anchor, step * monthsPerStep),
    endMs: addMonthsClamped(anchor, (step + 1) * monthsPerStep),
  };
}

function calendarPeriod(reset: MeteredReset, nowMs: number): MeteredPeriod {
  const now = new Date(nowMs);
  const year = now.getUTCFullYear();
  const month = now.getUTCMonth();
  switch (reset) {
    case 'day': {
      const startMs = Date.UTC(year, month, now.getUTCDate());
      return { startMs, endMs: startMs + DAY_MS };
    }
    case 'week': {
      const daysSinceMonday = (now.getUTCDay() + 6) % 7;
      const startMs = Date.UTC(year, month, now.getUTCDate() - daysSinceMonday);
      return { startMs, endMs: startMs + WEEK_MS };
    }
    case 'month':
      return { startMs: Date.UTC(year, month, 1), endMs: Date.UTC(year, month + 1, 1) };
    case 'year':
      return { startMs: Date.UTC(year, 0, 1), endMs: Date.UTC(year + 1, 0, 1) };
    case 'never':
      return { startMs: NEVER_CALENDAR_START_MS, endMs: null };
  }
}

/**
 * The period containing `nowMs`: on the calendar when `anchorMs` is null, else anchored at `anchorMs` (the granting
 * subscription's start). An instant before the anchor falls in the period that ends at the anchor.
 */
export function meteredPeriodAt(reset: MeteredReset, anchorMs: number | null, nowMs: number): MeteredPeriod {
  if (anchorMs === null) return calendarPeriod(reset, nowMs);
  switch (reset) {
    case 'day':
      return fixedSteps(anchorMs, DAY_MS, nowMs);
    case 'week':
      return fixedSteps(anchorMs, WEEK_MS, nowMs);
    case 'month':
      return monthSteps(anchorMs, 1, nowMs);
    case 'year':
      return monthSteps(anchorMs, 12, nowMs);
    case 'never':
      return { startMs: anchorMs, endMs: null };
  }
}
