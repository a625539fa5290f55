import { meteredPeriodOf, meteredTermsOf } from '@ent/common/resolve/resolve';
import type { CatalogDoc, SubscriberDoc } from '@ent/common/snapshots/documents';

/** DESIGN.md §5: `usage.threshold_reached` at 80 % and 100 % of a period's limit. */
export type UsageThreshold = 80 | 100;
export const USAGE_THRESHOLDS: readonly UsageThreshold[] = [80, 100];

/**
 * The thresholds `used` has reached against `limit`. An unlimited balance never reaches one; a limit of 0 (a
 * metered feature nobody grants) is reached, both thresholds at once, by the first unit used.
 */
export function thresholdsReached(used: number, limit: number | null): UsageThreshold[] {
  if (limit === null || used <= 0) return [];
  return USAGE_THRESHOLDS.filter((threshold) => used * 100 >= threshold * limit);
}

export interface PersistedPeriod {
  feature: string;
  periodStartMs: number;
  periodEndMs: number | null;
}

/**
 * The limit that governs a balance's period, from snapshots built from Postgres: the subscriber's terms for the
 * feature at the period's last instant (now, for the current period), provided those terms still count this period.
 * undefined when nothing governs it: the feature is gone or no longer metered, or the terms now count other periods
 * (a new reset or anchor left this balance behind, decisions.md "Usage is keyed by period").
 */
export function governingLimit(
  catalog: CatalogDoc,
  subscriber: SubscriberDoc,
  period: PersistedPeriod,
  nowMs: number,
): number | null | undefined {
  if (catalog.features[period.feature] !== 'metered') return undefined;
  const atMs = period.periodEndMs === null ? nowMs : Math.min(nowMs, period.periodEndMs - 1);
  const terms = meteredTermsOf(catalog, subscriber, period.feature, atMs);
  if (meteredPeriodOf(terms, atMs).startMs !== period.periodStartMs) return undefined;
  return terms.limit;
}
