import type { MeteredPeriod } from '@ent/common/metering/metered-period';
import { meteredTermsOf, type MeteredTerms } from '@ent/common/resolve/resolve';
import type { CatalogDoc, SubscriberDoc } from '@ent/common/snapshots/documents';
import { createPeriodCache } from './period-cache.ts';

/** A metered feature's terms and current period as a pair of documents resolves them, and what they spell. */
export interface OperationTerms {
  terms: MeteredTerms;
  /** Shared by every operation of the same (reset, anchor) in the period (period-cache.ts), its labels included. */
  period: MeteredPeriod;
  /** `|<feature>|<period start ms>`: a balance member is the subscriber id followed by this (meteredMember). */
  memberTail: string;
  /** The rendering terms a key's record keeps (metered-operations.ts's EncodedTerms), credits not listed. */
  encoded: string;
}

interface Kept extends OperationTerms {
  /** The catalog they were resolved with: a subscriber's own document outlives a catalog version. */
  catalog: CatalogDoc;
}

const periodOf = createPeriodCache();

// By subscriber document, then feature. Documents are replaced, never changed: a plan set's interned document is
// shared by its subscribers (one entry for all of them), and an entry goes with the document it was resolved from.
const kept = new WeakMap<SubscriberDoc, Map<string, Kept>>();

/** True while `nowMs` lies in the period (a clock set back, as tests do, leaves it). */
const holds = (period: MeteredPeriod, nowMs: number) =>
  period.startMs <= nowMs && (period.endMs === null || nowMs < period.endMs);

/** Distinct texts kept at once by sharedText; a full set starts over (the texts in use come back). */
const SHARED_TEXTS_MAX = 10_000;
const sharedTexts = new Map<string, string>();

/**
 * One string for each text many subscribers' terms spell alike (a member tail, the rendering terms): kept per
 * subscriber document and feature, each its own copy cost a gateway about 150 bytes per pair (`npm run bench --
 * memory-credits`). Periods anchored on each subscription's start share little (their tails differ): the map then
 * starts over every 10,000 texts, at most that many strings held beside the cache's bound.
 */
function sharedText(text: string): string {
  const known = sharedTexts.get(text);
  if (known !== undefined) return known;
  if (sharedTexts.size >= SHARED_TEXTS_MAX) sharedTexts.clear();
  sharedTexts.set(text, text);
  return text;
}

function resolve(catalog: CatalogDoc, subscriber: SubscriberDoc, feature: string, nowMs: number): Kept {
  const terms = meteredTermsOf(catalog, subscriber, feature, nowMs);
  const period = periodOf(terms, nowMs);
  return {
    catalog,
    terms,
    period,
    memberTail: `|${feature}|${period.startMs}`,
    encoded: JSON.stringify([terms.limit, terms.soft ? 1 : 0, terms.source, period.startMs, period.endMs]),
  };
}

/**
 * `feature`'s terms at `nowMs`, resolved once per documents and period: a metered check or consume otherwise merges
 * the grants of every plan on each request. Terms an override on the feature decides are resolved every time (whether
 * the override is live depends on the instant).
 */
export function operationTermsOf(
  catalog: CatalogDoc,
  subscriber: SubscriberDoc,
  feature: string,
  nowMs: number,
): OperationTerms {
  if (subscriber.overrides[feature] !== undefined) return resolve(catalog, subscriber, feature, nowMs);
  let byFeature = kept.get(subscriber);
  const known = byFeature?.get(feature);
  if (known !== undefined && known.catalog === catalog && holds(known.period, nowMs)) return known;
  // Kept: its texts shared with every document's that spells them alike (terms an override decides are not kept).
  const made = resolve(catalog, subscriber, feature, nowMs);
  made.memberTail = sharedText(made.memberTail);
  made.encoded = sharedText(made.encoded);
  if (byFeature === undefined) kept.set(subscriber, (byFeature = new Map()));
  byFeature.set(feature, made);
  return made;
}
