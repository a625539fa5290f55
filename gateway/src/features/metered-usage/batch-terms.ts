import { meteredPeriodOf, meteredTermsOf, type MeteredTerms } from '@ent/common/resolve/resolve';
import type { MeteredPeriod } from '@ent/common/metering/metered-period';
import type { CatalogDoc, SubscriberDoc } from '@ent/common/snapshots/documents';

/**
 * A metered feature's terms and current period as one pair of documents resolves them, with what every operation
 * on it repeats (the balance member's tail, the terms as the scripts keep them). Shared by every event of a batch,
 * and of later batches, on subscribers that share the documents (a plan set's interned subscriber document).
 */
export interface ResolvedTerms {
  terms: MeteredTerms;
  period: MeteredPeriod;
  /** `|<feature>|<period start ms>`: a balance member is the subscriber id followed by this (meteredMember). */
  memberTail: string;
  /** The terms as an idempotent answer keeps them for its replay (metered-operations.ts renders them). */
  encoded: string;
  /** The period as answers write it. */
  periodStart: string;
  resetsAt: string | null;
}

// By catalog document, then subscriber document, then feature: documents are replaced, never changed, so an entry
// goes with the documents it was resolved from.
const resolved = new WeakMap<CatalogDoc, WeakMap<SubscriberDoc, Map<string, ResolvedTerms>>>();

/** True while `nowMs` is in the period (a period that never ends does not depend on the instant). */
const holds = (period: MeteredPeriod, nowMs: number) =>
  period.endMs === null || (period.startMs <= nowMs && nowMs < period.endMs);

function resolveNow(catalog: CatalogDoc, subscriber: SubscriberDoc, feature: string, nowMs: number) {
  const terms = meteredTermsOf(catalog, subscriber, feature, nowMs);
  const period = meteredPeriodOf(terms, nowMs);
  return {
    terms,
    period,
    memberTail: `|${feature}|${period.startMs}`,
    // The layout of metered-operations.ts's EncodedTerms: limit, soft, source, period start, period end.
    encoded: JSON.stringify([terms.limit, terms.soft ? 1 : 0, terms.source, period.startMs, period.endMs]),
    periodStart: new Date(period.startMs).toISOString(),
    resetsAt: period.endMs === null ? null : new Date(period.endMs).toISOString(),
  };
}

/**
 * `feature`'s terms and period at `nowMs`, kept until the period ends. Terms that an override decides are resolved
 * every time: whether the override is live depends on the instant.
 */
export function resolvedTermsOf(
  catalog: CatalogDoc,
  subscriber: SubscriberDoc,
  feature: string,
  nowMs: number,
): ResolvedTerms {
  if (subscriber.overrides[feature] !== undefined) return resolveNow(catalog, subscriber, feature, nowMs);
  let bySubscriber = resolved.get(catalog);
  if (bySubscriber === undefined) resolved.set(catalog, (bySubscriber = new WeakMap()));
  let byFeature = bySubscriber.get(subscriber);
  if (byFeature === undefined) bySubscriber.set(subscriber, (byFeature = new Map()));
  let entry = byFeature.get(feature);
  if (entry === undefined || !holds(entry.period, nowMs)) {
    entry = resolveNow(catalog, subscriber, feature, nowMs);
    byFeature.set(feature, entry);
  }
  return entry;
}
