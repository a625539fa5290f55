import { isLive, type CheckResult } from '@ent/common/resolve/resolve';
import { resolveFeature } from '@ent/common/resolve/resolve';
import { MISSING_SUBSCRIBER, type CatalogDoc, type SubscriberDoc } from '@ent/common/snapshots/documents';

/**
 * What a gateway keeps per subscriber, built so that most of it is shared.
 *
 * Most subscribers of an organization share one catalog version and one set of active plans and have no
 * override: they resolve to the same answers. A `PlanSet` holds those answers (and their serialized forms)
 * once per catalog version and set of plans; a subscriber's entry points at its plan set and keeps only what
 * differs: its live overrides. `resolveAll` (common/src/resolve) stays the definition; a property test checks
 * that an entry answers exactly what `resolveAll` answers for its own documents, whatever else is cached.
 */

/** Answers that depend on every feature (lists, bulk) rather than one. */
export const EVERY_FEATURE = null;

/** The resolution shared by all subscribers of one catalog version with the same active plans and no live override. */
export interface PlanSet {
  /** The interned subscriber document of such a subscriber: entries without overrides point here. */
  readonly doc: SubscriberDoc;
  /** Every catalog feature, ordered by key. */
  readonly results: readonly CheckResult[];
  readonly byFeature: ReadonlyMap<string, CheckResult>;
  /** Serialized answers (and their ETags), made once for every subscriber of the plan set. */
  readonly serialized: Map<string, string>;
  /** False when the catalog already held as many plan sets as it may: then it belongs to one entry alone. */
  readonly shared: boolean;
}

/** Distinct plan sets kept per catalog version; more (a catalog with thousands of plan combinations) are not shared. */
const MAX_PLAN_SETS = 4096;

/** One catalog version as the gateway holds it, with the plan sets resolved from it so far. */
export class CatalogEntry {
  private readonly planSets = new Map<string, PlanSet>();
  private planSetBytes = 0;

  /** Estimated heap bytes of the document itself. */
  private readonly docBytes: number;
  /** The metered features' keys, ordered (DESIGN.md §5): their answers carry use, read from Redis per request. */
  readonly meteredFeatures: readonly string[];
  /**
   * Plans with a subscription-anchored metered grant, or one that rolls over (a rollover is made only for a period
   * the subscription covered): their subscribers keep their own document (its subscription starts).
   */
  readonly anchoringPlans: ReadonlySet<string>;
  /** Per plan, its metered features that roll over: their answers list the period's rollover credit (creditBytes). */
  readonly rolloverFeatures: ReadonlyMap<string, readonly string[]>;
  /** Per plan, its metered grants' features: a subscriber with its own document keeps their terms (keptTermsBytes). */
  readonly meteredGrants: ReadonlyMap<string, readonly string[]>;

  constructor(
    readonly version: number,
    readonly doc: CatalogDoc,
  ) {
    this.docBytes = catalogDocBytes(doc);
    this.meteredFeatures = Object.keys(doc.features)
      .filter((key) => doc.features[key] === 'metered')
      .sort();
    const anchoring = new Set<string>();
    const rolling = new Map<string, string[]>();
    const metered = new Map<string, string[]>();
    for (const [planId, plan] of Object.entries(doc.plans)) {
      for (const [feature, grant] of Object.entries(plan.grants)) {
        if (grant.kind !== 'metered') continue;
        appendTo(metered, planId, feature);
        if (grant.anchor === 'subscription' || grant.rollover) anchoring.add(planId);
        if (grant.rollover) appendTo(rolling, planId, feature);
      }
    }
    this.anchoringPlans = anchoring;
    this.rolloverFeatures = rolling;
    this.meteredGrants = metered;
  }

  /** Estimated bytes held by this catalog version and its shared plan sets. */
  get bytes(): number {
    return this.docBytes + this.planSetBytes;
  }

  /** The plan set of `plans` (order and repeats do not matter: grants merge). */
  planSet(plans: readonly string[]): PlanSet {
    const key = planSetKey(plans);
    const known = this.planSets.get(key);
    if (known) return known;
    const shared = this.planSets.size < MAX_PLAN_SETS;
    const planSet = resolvePlanSet(this.doc, key === '' ? [] : key.split('\n'), shared);
    if (shared) {
      this.planSets.set(key, planSet);
      this.planSetBytes += planSetBytes(planSet);
    }
    return planSet;
  }
}

function appendTo(lists: Map<string, string[]>, key: string, item: string): void {
  const list = lists.get(key);
  if (list) list.push(item);
  else lists.set(key, [item]);
}

/** A catalog's estimated heap bytes: its features, plans and grants (20 features, 5 plans: about 10 KB). */
function catalogDocBytes(doc: CatalogDoc): number {
  let grants = 0;
  for (const plan of Object.values(doc.plans)) grants += Object.keys(plan.grants).length;
  return 1000 + Object.keys(doc.features).length * 120 + Object.keys(doc.plans).length * 200 + grants * 110;
}

const planSetKey = (plans: readonly string[]): string => {
  if (plans.length === 0) return '';
  if (plans.length === 1) return plans[0]!;
  return [...new Set(plans)].sort().join('\n');
};

const EMPTY_OVERRIDES: SubscriberDoc['overrides'] = Object.freeze({}) as SubscriberDoc['overrides'];

function resolvePlanSet(catalog: CatalogDoc, plans: string[], shared: boolean): PlanSet {
  const doc: SubscriberDoc = { exists: true, plans, overrides: EMPTY_OVERRIDES };
  const results: CheckResult[] = [];
  const byFeature = new Map<string, CheckResult>();
  for (const key of Object.keys(catalog.features).sort()) {
    const result = resolveFeature(catalog, doc, key, 0)!;
    results.push(result);
    byFeature.set(key, result);
  }
  return { doc, results, byFeature, serialized: new Map(), shared };
}

/** Rough heap bytes of a plan set: its results and map entries, before any serialized answer. */
const planSetBytes = (planSet: PlanSet): number => 200 + planSet.results.length * 160;

/**
 * One subscriber's entitlements: its plan set, plus the overrides that are live now (null when none, the
 * common case). Versions say which documents it was built from.
 */
export class SubscriberEntry {
  /** Live overrides of catalog features with the feature's kind, by feature key; null when there are none. */
  private overrides: Map<string, CheckResult> | null = null;
  /** The first instant (epoch ms) a live override expires and the answers change; null = never. */
  private validUntil: number | null = null;
  readonly planSet: PlanSet;
  /**
   * The organization's subscriber-write stamp at which a gate reply last confirmed this entry (0: never). While
   * Redis still holds it, the gate need not read the subscriber's version again (eval-gate-batch-8.lua).
   */
  verifiedStamp = 0;

  constructor(
    readonly catalog: CatalogEntry,
    readonly subscriberVersion: number,
    /** The subscriber's document; for a subscriber without overrides, its plan set's interned one. */
    readonly subscriber: SubscriberDoc,
    /** Unknown subscribers are remembered briefly (epoch ms); null for a subscriber that exists. */
    readonly forgetAt: number | null,
    nowMs: number,
  ) {
    this.planSet = catalog.planSet(subscriber.plans);
    this.resolveOverrides(nowMs);
  }

  /** Builds the entry of `doc`, interning the document when it has no overrides. */
  static of(
    catalog: CatalogEntry,
    subscriberVersion: number,
    doc: SubscriberDoc,
    nowMs: number,
    forgetAt: number | null,
  ) {
    if (!doc.exists)
      return new SubscriberEntry(catalog, subscriberVersion, MISSING_SUBSCRIBER, forgetAt, nowMs);
    const interned =
      hasOverrides(doc) || doc.credits !== undefined || anchorsMetered(catalog, doc)
        ? doc
        : catalog.planSet(doc.plans).doc;
    return new SubscriberEntry(catalog, subscriberVersion, interned, forgetAt, nowMs);
  }

  get catalogVersion(): number {
    return this.catalog.version;
  }

  /** The subscriber version a gate reply gave when it confirmed this entry (an unknown subscriber: none, 0). */
  get verifiedVersion(): number {
    return this.forgetAt === null ? this.subscriberVersion : 0;
  }

  /** Override expiry is exact: past `validUntil` the overrides are resolved again from the document held. */
  refreshAt(nowMs: number): this {
    if (this.validUntil !== null && nowMs >= this.validUntil) this.resolveOverrides(nowMs);
    return this;
  }

  /** The feature's answer; undefined when the catalog has no such feature. */
  result(feature: string): CheckResult | undefined {
    return this.overrides?.get(feature) ?? this.planSet.byFeature.get(feature);
  }

  /** Every catalog feature's answer, ordered by key. */
  results(): readonly CheckResult[] {
    const overrides = this.overrides;
    if (overrides === null) return this.planSet.results;
    return this.planSet.results.map((result) => overrides.get(result.feature) ?? result);
  }

  /**
   * One feature's answer serialized by `serialize` (a function made once, not per request), kept under `key` on the
   * shared plan set unless a live override decides it; undefined when the catalog has no such feature. The warm
   * check and OFREP single-flag path: one map lookup per layer and no allocation once serialized.
   */
  serializedResult(
    key: string,
    feature: string,
    serialize: (result: CheckResult) => string,
  ): string | undefined {
    const override = this.overrides?.get(feature);
    if (override !== undefined) return serialize(override);
    const result = this.planSet.byFeature.get(feature);
    if (result === undefined) return undefined;
    if (!this.planSet.shared) return serialize(result);
    return this.planSet.serialized.get(key) ?? this.keepOnPlanSet(key, serialize(result));
  }

  /**
   * A serialized answer that depends on one feature (or on every feature: EVERY_FEATURE). When the plan set's
   * answer is the subscriber's, it is made once and kept on the shared plan set; otherwise it is made for this
   * request (only subscribers with a live override on what is asked pay that, and they keep nothing).
   */
  serialized(key: string, feature: string | typeof EVERY_FEATURE, make: () => string): string {
    const own = this.overrides !== null && (feature === EVERY_FEATURE || this.overrides.has(feature));
    if (own || !this.planSet.shared) return make();
    return this.planSet.serialized.get(key) ?? this.keepOnPlanSet(key, make());
  }

  /** Kept on the shared plan set for every subscriber of it (no closure on the warm path: the value is made first). */
  private keepOnPlanSet(key: string, value: string): string {
    this.planSet.serialized.set(key, value);
    return value;
  }

  /** Estimated heap bytes this entry holds beyond what it shares (used to bound the cache by bytes). */
  bytes(subscriberIdLength: number): number {
    let total = ENTRY_BYTES + subscriberIdLength * 2;
    if (!this.planSet.shared) total += planSetBytes(this.planSet);
    if (this.subscriber !== this.planSet.doc && this.subscriber !== MISSING_SUBSCRIBER) {
      total += DOCUMENT_BYTES + this.subscriber.plans.length * 48;
      total += Object.keys(this.subscriber.overrides).length * OVERRIDE_BYTES;
      total += creditBytes(this.subscriber, this.catalog);
      total += keptTermsBytes(this.subscriber, this.catalog);
    }
    return total;
  }

  private resolveOverrides(nowMs: number): void {
    const { features } = this.catalog.doc;
    let overrides: Map<string, CheckResult> | null = null;
    let validUntil: number | null = null;
    for (const [feature, override] of Object.entries(this.subscriber.overrides)) {
      const kind = features[feature];
      if (kind === undefined || !isLive(override, nowMs)) continue;
      if (override.expiresAt !== null && (validUntil === null || override.expiresAt < validUntil))
        validUntil = override.expiresAt;
      // A metered override is read with the feature's use (meteredTermsOf), never from here.
      if (override.kind !== kind || override.kind === 'metered') continue;
      overrides ??= new Map();
      overrides.set(
        feature,
        override.kind === 'flag'
          ? { feature, kind: 'flag', allowed: override.allowed, source: 'override' }
          : { feature, kind: 'limit', limit: override.limit, source: 'override' },
      );
    }
    this.overrides = overrides;
    this.validUntil = validUntil;
  }
}

/** Whether the subscriber's own subscription starts decide a metered period (the plan set's document has none). */
const anchorsMetered = (catalog: CatalogEntry, doc: SubscriberDoc): boolean =>
  doc.subscribedAt !== undefined &&
  catalog.anchoringPlans.size > 0 &&
  doc.plans.some((plan) => catalog.anchoringPlans.has(plan));

const hasOverrides = (doc: SubscriberDoc): boolean => {
  for (const _ in doc.overrides) return true;
  return false;
};

/**
 * Heap bytes, measured with `npm run bench -- memory` (bench/src/memory.ts): an entry object, its slot in the
 * LRU (map entry, list links, size), its slot in the index by organization and subscriber, its verified stamp (a
 * boxed double: stamps exceed small integers), and, for subscribers with overrides, their own document and results.
 */
const ENTRY_BYTES = 304;
const DOCUMENT_BYTES = 120;
const OVERRIDE_BYTES = 260;

/**
 * Heap bytes of a subscriber's credits (issue 35), measured with `npm run bench -- memory-credits`: each credit in the
 * document (its object, id and boxed figures), and per credited feature what the metered answers build from them and
 * keep with the document (gateway/src/metering: the operation's terms and credit spec, the credits in spending order,
 * the last answer's listed credits and their texts), counted as the document is cached, before the first consume, so
 * that the bound holds however the subscriber is used. Not counted here: the balances' last figures
 * (metered-balances.ts), bounded by their own count.
 */
const CREDIT_DOC_BYTES = 200;
const CREDITED_FEATURE_BYTES = 1000;
const ANSWERED_CREDIT_BYTES = 400;

/**
 * Heap bytes of the metered terms kept for a subscriber document of its own (operation-terms.ts): the document's map
 * (its WeakMap slot included), then per feature the map slot, the kept terms and their period's reference (the texts
 * are shared). Measured on 100,000 documents after full collections: 371 B for the first feature, 144 B for each
 * further one. A plan set's subscribers share their document's, counted nowhere per subscriber.
 */
const KEPT_TERMS_DOC_BYTES = 230;
const KEPT_TERMS_BYTES = 145;

/**
 * The terms a subscriber with its own document keeps, counted up front: one per metered feature its plans grant,
 * but for those creditBytes counts (their terms are in CREDITED_FEATURE_BYTES) and those an override decides (resolved
 * per request, never kept).
 */
function keptTermsBytes(doc: SubscriberDoc, catalog: CatalogEntry): number {
  if (catalog.meteredGrants.size === 0) return 0;
  const counted = new Set<string>();
  for (const plan of doc.plans)
    for (const feature of catalog.meteredGrants.get(plan) ?? [])
      if (doc.overrides[feature] === undefined && !((doc.credits?.[feature]?.length ?? 0) > 0))
        counted.add(feature);
  for (const plan of doc.plans)
    for (const feature of catalog.rolloverFeatures.get(plan) ?? []) counted.delete(feature);
  return counted.size === 0 ? 0 : KEPT_TERMS_DOC_BYTES + counted.size * KEPT_TERMS_BYTES;
}

function creditBytes(doc: SubscriberDoc, catalog: CatalogEntry): number {
  let total = 0;
  for (const feature in doc.credits) {
    const count = doc.credits[feature]!.length;
    if (count > 0) total += CREDITED_FEATURE_BYTES + count * (CREDIT_DOC_BYTES + ANSWERED_CREDIT_BYTES);
  }
  if (catalog.rolloverFeatures.size === 0) return total;
  // A feature that rolls over lists the period's rollover credit, stored or not yet (its placeholder): answered as a
  // credited feature even when the document holds no credit of it.
  let counted: Set<string> | undefined;
  for (const plan of doc.plans) {
    for (const feature of catalog.rolloverFeatures.get(plan) ?? []) {
      if ((doc.credits?.[feature]?.length ?? 0) > 0 || counted?.has(feature)) continue;
      (counted ??= new Set()).add(feature);
      total += CREDITED_FEATURE_BYTES + ANSWERED_CREDIT_BYTES;
    }
  }
  return total;
}
