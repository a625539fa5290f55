import type { MeteredUsage } from '../../api/types.ts';
import { formatTime } from '../../components/format.ts';

/**
 * What a metered feature's bar shows: how much of the limit the current period used. Pure, so the rules are tested
 * without a browser (console/test/usage-meter.test.ts).
 */
export interface UsageMeter {
  /** Share of the limit used (may pass 100); null when there is no share to give: unlimited, or a limit of 0. */
  percent: number | null;
  /** Bar widths in percent of the bar: the use within the limit, then the use past it (soft limits only). */
  withinWidth: number;
  overageWidth: number;
  /** Use past the limit (what the service answers as `overage` for soft limits; 0 otherwise). */
  overage: number;
  /**
   * `credits`: the allowance is used up and live credits cover the use past it, with something left (`remaining`
   * counts them): the subscriber is not stopped (DESIGN.md §5 "Credits").
   */
  state: 'unlimited' | 'within' | 'near' | 'reached' | 'overage' | 'credits';
}

/** What the live credits listed still hold (the check result lists those with something left). */
export const creditsLeftOf = (usage: MeteredUsage): number =>
  (usage.credits ?? []).reduce((sum, credit) => sum + credit.remaining, 0);

/** At this share the bar turns from "within" to "near" (the 80 % of the usage thresholds). */
const NEAR_PERCENT = 80;

export function usageMeterOf(usage: MeteredUsage): UsageMeter {
  const { used, limit } = usage;
  if (limit === null)
    return { percent: null, withinWidth: 0, overageWidth: 0, overage: 0, state: 'unlimited' };
  const overage = usage.overage ?? 0;
  const percent = limit === 0 ? null : (used / limit) * 100;
  if (overage > 0) {
    // The whole bar is the use: the limit's share of it, then the overage.
    const withinWidth = (limit / used) * 100;
    return { percent, withinWidth, overageWidth: 100 - withinWidth, overage, state: 'overage' };
  }
  if (used >= limit && creditsLeftOf(usage) > 0) {
    // Past the allowance on credits: the bar is full (the allowance is used up); the badge says what credits hold.
    return {
      percent,
      withinWidth: used > 0 || limit > 0 ? 100 : 0,
      overageWidth: 0,
      overage: 0,
      state: 'credits',
    };
  }
  const state = used >= limit ? 'reached' : percent !== null && percent >= NEAR_PERCENT ? 'near' : 'within';
  const withinWidth = limit === 0 ? (used > 0 ? 100 : 0) : Math.min(100, percent ?? 0);
  return { percent, withinWidth, overageWidth: 0, overage: 0, state };
}

/** `42%`, `7.5%`, `0.1%`: rounded down, so a limit not yet reached never reads 100 %. */
export function percentText(percent: number): string {
  if (percent >= 10) return `${Math.floor(percent)}%`;
  if (percent > 0 && percent < 0.1) return '<0.1%';
  return `${Math.floor(percent * 10) / 10}%`;
}

/**
 * The current period in words: `Since <start>; resets on <date and time>`, or for a period that never ends
 * `Since <start>; never resets` (`Never resets` alone when it is counted on the calendar: from the epoch).
 */
export function periodText(usage: MeteredUsage): string {
  if (usage.resets_at === null) {
    return Date.parse(usage.period_start) === 0
      ? 'Never resets'
      : `Since ${formatTime(usage.period_start)}; never resets`;
  }
  return `Since ${formatTime(usage.period_start)}; resets on ${formatTime(usage.resets_at)}`;
}
