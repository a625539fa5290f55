import { meteredPeriodAt, type MeteredPeriod } from '@ent/common/metering/metered-period';
import type { MeteredTerms } from '@ent/common/resolve/resolve';

/** Periods of distinct (reset, anchor) pairs kept at once: anchored terms give one pair per subscription. */
const MAX_PERIODS = 10_000;

/**
 * The period of a metered eval, computed once per (reset, anchor) and kept until it ends: the date arithmetic of a
 * month (and its two ISO labels) would otherwise run on every consume. A kept period answers an instant only when it
 * contains it, so the answer is always the one `meteredPeriodAt` gives for that instant, on the app's clock.
 */
export function createPeriodCache(max = MAX_PERIODS) {
  const periods = new Map<string, MeteredPeriod>();
  return (terms: Pick<MeteredTerms, 'reset' | 'anchorMs'>, nowMs: number): MeteredPeriod => {
    const key = terms.anchorMs === null ? terms.reset : `${terms.reset}|${terms.anchorMs}`;
    const known = periods.get(key);
    if (known && known.startMs <= nowMs && (known.endMs === null || nowMs < known.endMs)) return known;
    const { startMs, endMs } = meteredPeriodAt(terms.reset, terms.anchorMs, nowMs);
    const period: MeteredPeriod = {
      startMs,
      endMs,
      startIso: new Date(startMs).toISOString(),
      endIso: endMs === null ? null : new Date(endMs).toISOString(),
    };
    // Bounded without bookkeeping per hit: a full cache starts over (the periods in use come back at once).
    if (periods.size >= max && !known) periods.clear();
    periods.set(key, period);
    return period;
  };
}
