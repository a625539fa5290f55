import type { CatalogDoc, Grant, OverrideValue, SubscriberDoc } from '../snapshots/documents.ts';

import type { CheckResult } from '@ent/contract/evals';

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
