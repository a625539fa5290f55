import type {
  CatalogDoc,
  Grant,
  MeteredGrant,
  OverrideValue,
  SubscriberDoc,
} from '../snapshots/documents.ts';
import { meteredPeriodAt, RESET_ORDER, type MeteredPeriod } from '../metering/metered-period.ts';

import type { CheckCredit } from '@ent/contract/credits';
import type { CheckResult, MeteredCheckResult } from '@ent/contract/evals';

export type { CheckResult } from '@ent/contract/evals';

export interface ResolvedEntitlements {
  /** Every catalog feature, ordered by feature key. */
  results: CheckResult[];
  /** By feature key. */
  byFeature: Map<string, CheckResult>;
  /** The first instant (epoch ms) at which a live override expires and the answer changes; null = never. */
  validUntil: number | null;
}

/** Live: no expiry, or an expiry strictly after now (at `expiresAt` itself the override has expired). */
export const isLive = (override: OverrideValue, nowMs: number): boolean =>
  override.expiresAt === null || override.expiresAt > nowMs;

function fromOverride(feature: string, override: OverrideValue): CheckResult {
  return override.kind === 'flag'
    ? { feature, kind: 'flag', allowed: override.allowed, source: 'override' }
    : { feature, kind: 'limit', limit: override.limit, source: 'override' };
}

/**
 * What decides a metered feature's answer apart from its use: the limit per period, how periods run, whether the
 * limit is soft, and where the answer comes from. `anchorMs` is the start of the granting subscription when the
 * periods are anchored on it (null: calendar periods).
 */
export interface MeteredTerms {
  limit: number | null;
  reset: MeteredGrant['reset'];
  anchorMs: number | null;
  soft: boolean;
  source: 'override' | 'plan' | 'none';
  /** The winning grant's `rollover.max` (issue 35); null = none. */
  rollover: number | null;
  /** The plan of the winning grant (null: none): the subscription whose start bounds a rollover. */
  planId: string | null;
}

/** Without a grant: nothing to use, counted by calendar month. */
const UNGRANTED: Omit<MeteredGrant, 'kind'> = {
  limit: 0,
  reset: 'month',
  anchor: 'calendar',
  soft: false,
  rollover: null,
};

/** True when `candidate` beats `best`: an unlimited grant, else the larger limit, else the shorter period. */
function beats(candidate: MeteredGrant, best: MeteredGrant): boolean {
  if (best.limit === null)
    return candidate.limit === null && RESET_ORDER[candidate.reset] < RESET_ORDER[best.reset];
  if (candidate.limit === null) return true;
  if (candidate.limit !== best.limit) return candidate.limit > best.limit;
  return RESET_ORDER[candidate.reset] < RESET_ORDER[best.reset];
}

/**
 * DESIGN.md §5: across active subscriptions the limit merges as for limit grants (null wins, else the largest); reset,
 * anchor and soft come from that grant (a tie: the shorter period). A live metered override replaces the limit only.
 */
export function meteredTermsOf(
  catalog: CatalogDoc,
  subscriber: SubscriberDoc,
  feature: string,
  nowMs: number,
): MeteredTerms {
  let best: MeteredGrant | null = null;
  let bestPlan: string | null = null;
  for (const planId of subscriber.plans) {
    const grant = catalog.plans[planId]?.grants[feature];
    if (grant?.kind !== 'metered') continue;
    const earlier = bestPlan !== null && planId === bestPlan;
    if (best === null || (!earlier && beats(grant, best))) {
      best = grant;
      bestPlan = planId;
    }
  }
  const chosen = best ?? { kind: 'metered' as const, ...UNGRANTED };
  const anchorMs =
    chosen.anchor === 'subscription' && bestPlan !== null
      ? (subscriber.subscribedAt?.[bestPlan] ?? null)
      : null;
  const override = subscriber.overrides[feature];
  const overridden = override !== undefined && override.kind === 'metered' && isLive(override, nowMs);
  return {
    limit: overridden ? (override as { limit: number | null }).limit : chosen.limit,
    reset: chosen.reset,
    anchorMs,
    soft: chosen.soft,
    source: overridden ? 'override' : best ? 'plan' : 'none',
    rollover: chosen.rollover,
    planId: bestPlan,
  };
}

/** The period of `terms` that contains `nowMs`. */
export const meteredPeriodOf = (terms: MeteredTerms, nowMs: number): MeteredPeriod =>
  meteredPeriodAt(terms.reset, terms.anchorMs, nowMs);

/**
 * What credits add to a balance (issue 35): the period's usage they covered (`k` in Redis), and the live credits
 * with something left, in spending order.
 */
export interface MeteredCredits {
  covered: number;
  credits: readonly CheckCredit[];
}

const NO_CHECK_CREDITS: CheckCredit[] = Object.freeze([]) as unknown as CheckCredit[];
export const NO_METERED_CREDITS: MeteredCredits = Object.freeze({ covered: 0, credits: NO_CHECK_CREDITS });

/**
 * A metered answer from its terms, its period, what was used in it and what credits add. `remaining` is the
 * allowance's rest (the limit less the usage credits did not cover) plus what live credits have left; `allowed` is
 * `remaining > 0` (or true when unlimited or soft) unless `deducted` says what a consume did.
 */
export function meteredResult(
  feature: string,
  terms: Pick<MeteredTerms, 'limit' | 'soft' | 'source'>,
  period: MeteredPeriod,
  used: number,
  deducted?: boolean,
  credits: MeteredCredits = NO_METERED_CREDITS,
): MeteredCheckResult {
  const { limit, soft } = terms;
  const fromAllowance = used - credits.covered;
  let remaining: number | null = null;
  if (limit !== null) {
    remaining = Math.max(0, limit - fromAllowance);
    for (const credit of credits.credits) remaining += credit.remaining;
  }
  const result: MeteredCheckResult = {
    feature,
    kind: 'metered',
    limit,
    used,
    remaining,
    allowed: deducted ?? (remaining === null || soft || remaining > 0),
    period_start: new Date(period.startMs).toISOString(),
    resets_at: period.endMs === null ? null : new Date(period.endMs).toISOString(),
    source: terms.source,
  } as MeteredCheckResult;
  if (soft) result.overage = limit === null ? 0 : Math.max(0, fromAllowance - limit);
  result.credits = credits.credits as CheckCredit[];
  return result;
}

function fromGrants(feature: string, kind: 'flag' | 'limit', grants: Grant[]): CheckResult {
  if (kind === 'flag') {
    const granted = grants.some((grant) => grant.kind === 'flag');
    return { feature, kind, allowed: granted, source: granted ? 'plan' : 'none' };
  }
  let limit: number | null = 0;
  let granted = false;
  for (const grant of grants) {
    if (grant.kind !== 'limit') continue;
    granted = true;
    if (grant.limit === null) {
      limit = null;
      break;
    }
    if (limit !== null && grant.limit > limit) limit = grant.limit;
  }
  return { feature, kind, limit: granted ? limit : 0, source: granted ? 'plan' : 'none' };
}

function grantsFor(catalog: CatalogDoc, subscriber: SubscriberDoc, feature: string): Grant[] {
  const grants: Grant[] = [];
  for (const planId of subscriber.plans) {
    const grant = catalog.plans[planId]?.grants[feature];
    if (grant) grants.push(grant);
  }
  return grants;
}

/**
 * DESIGN.md §3 for one feature: a live override wins; otherwise the grants of all active subscriptions
 * merged (archived plans included); a feature nobody grants is off / 0 with source `none`.
 * Returns null for a feature that is not in the catalog.
 */
export function resolveFeature(
  catalog: CatalogDoc,
  subscriber: SubscriberDoc,
  feature: string,
  nowMs: number,
): CheckResult | null {
  const kind = catalog.features[feature];
  if (!kind) return null;
  // The static view (nothing used): the gateway answers a metered feature with its use from Redis.
  if (kind === 'metered') {
    const terms = meteredTermsOf(catalog, subscriber, feature, nowMs);
    return meteredResult(feature, terms, meteredPeriodOf(terms, nowMs), 0);
  }
  const override = subscriber.overrides[feature];
  if (override && override.kind === kind && isLive(override, nowMs)) return fromOverride(feature, override);
  return fromGrants(feature, kind, grantsFor(catalog, subscriber, feature));
}

/** Every catalog feature resolved at `nowMs`, and until when that answer holds. */
export function resolveAll(
  catalog: CatalogDoc,
  subscriber: SubscriberDoc,
  nowMs: number,
): ResolvedEntitlements {
  const keys = Object.keys(catalog.features).sort();
  const results: CheckResult[] = [];
  const byFeature = new Map<string, CheckResult>();
  for (const key of keys) {
    const result = resolveFeature(catalog, subscriber, key, nowMs)!;
    results.push(result);
    byFeature.set(key, result);
  }
  let validUntil: number | null = null;
  for (const [feature, override] of Object.entries(subscriber.overrides)) {
    if (override.expiresAt === null || override.expiresAt <= nowMs || !(feature in catalog.features))
      continue;
    if (validUntil === null || override.expiresAt < validUntil) validUntil = override.expiresAt;
  }
  return { results, byFeature, validUntil };
}

/** GET entitlements: granted or overridden features, or with `all` every catalog feature; by feature key. */
export const listedEntitlements = (resolved: ResolvedEntitlements, all: boolean): CheckResult[] =>
  all ? resolved.results : resolved.results.filter((result) => result.source !== 'none');
