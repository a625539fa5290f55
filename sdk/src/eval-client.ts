import type { paths } from './generated/api.ts';
import { randomUUID } from 'node:crypto';
import { EntitlementsError, isOutage } from './errors.ts';
import { Transport, holdsArray, isCheckResult, type EvalUsage, type TransportOptions } from './transport.ts';
import {
  reportUsage,
  reportUsageEvents,
  type ReportAnswer,
  type UsageAmount,
  type UsageBatchAnswer,
  type UsageEventInput,
} from './usage-reports.ts';

type ListBody =
  paths['/org/subscribers/{subscriber_id}/entitlements']['get']['responses'][200]['content']['application/json'];
/** One feature's answer as the service sends it (SPEC.md part 2). */
export type Entitlement = ListBody['entitlements'][number];

/** A fallback: a boolean for a flag (`allowed`), a number or null (unlimited) for a limit. */
export type FallbackValue = boolean | number | null;
export type FailMode = 'open' | 'closed';

export interface EvalClientOptions extends TransportOptions {
  /** How long a subscriber's entitlements are answered locally before revalidating (ETag); default 30 s, 0 = never. */
  cacheTtlMs?: number;
  /** At most this many subscribers cached (least recently used dropped); default 10,000. */
  maxCachedSubscribers?: number;
  /** Per feature: what to answer when the service cannot (outage, timeout, 429/409 after retries). */
  fallbacks?: Record<string, FallbackValue>;
  /** Answered for features without a fallback of their own; default: by fail mode. */
  defaultFallback?: FallbackValue;
  /** Per feature: open (allowed / unlimited) or closed (denied / 0) when no fallback value is configured. */
  failModes?: Record<string, FailMode>;
  /** Default `closed`. */
  defaultFailMode?: FailMode;
  /** Answer a stale cached document (`stale: true`) before any fallback when the service fails; default true. */
  serveStale?: boolean;
}

/** A metered feature's use in its current period, with the service's field names (DESIGN.md §5). */
export interface MeteredUse {
  used: number;
  /** null when unlimited. */
  remaining: number | null;
  period_start: string;
  /** When the next period starts; null for reset "never". */
  resets_at: string | null;
  /** Soft limits only: usage beyond the allowance and the credits. */
  overage?: number;
  /** Live credits with something left, in the order they are spent ([] when none); counted in `remaining`. */
  credits: MeteredCredit[];
}

/** A credit on a metered feature as the check result lists it (docs/credits.md). */
export interface MeteredCredit {
  credit_id: string;
  remaining: number;
  /** null: never expires. */
  expires_at: string | null;
}

export interface CheckAnswer {
  feature: string;
  kind: 'flag' | 'limit' | 'metered' | null;
  /** For a metered feature after a consume: whether it was deducted. */
  allowed: boolean;
  /** null = unlimited. For a flag: null when allowed, 0 when not. */
  limit: number | null;
  source: 'override' | 'plan' | 'none' | null;
  /** A metered feature's use in the current period; null for flags, limits and fallbacks. */
  metered: MeteredUse | null;
  /** true when this is a configured fallback or fail mode, not the service's answer. */
  fallback: boolean;
  /** true when answered from a cached document the service could not revalidate. */
  stale: boolean;
  /** The eval usage headers of the last response this answer came from. */
  usage: EvalUsage | null;
  /** Why the service could not answer, when `fallback` or `stale`. */
  error: EntitlementsError | null;
}

export interface CheckOptions {
  /** Metered features only: deduct this much if it fits, atomically with the check (never answered from the cache). */
  consume?: number;
  /** The consume's idempotency key; default a new one per call, sent again on each of the call's retries. */
  idempotencyKey?: string;
}

export interface ConsumeAnswer extends CheckAnswer {
  /** The key the consume was sent with: consume again with it, and it is deducted at most once. */
  idempotencyKey: string;
  /** true when the service had applied this key before and answered its first answer again. */
  replayed: boolean;
}

/** The list route's own field names (`subscriber_id`), with what the client adds. */
export interface ListAnswer {
  subscriber_id: string;
  entitlements: Entitlement[];
  stale: boolean;
  usage: EvalUsage | null;
}

interface Cached {
  entitlements: Entitlement[];
  byFeature: Map<string, Entitlement>;
  etag: string | null;
  usage: EvalUsage | null;
  freshUntil: number;
  /** Features this document lacked that were asked about again already (kept through 304s, new with a new body). */
  reasked: Set<string>;
}

/** A request for one subscriber's document that concurrent calls share. */
interface PendingFetch {
  promise: Promise<Cached>;
  /** Set by invalidate(): what this request read may predate a write, so its answer is not cached. */
  invalidated: boolean;
}

/**
 * Evals for servers (member keys are secrets: never ship this to a browser). Each subscriber's whole
 * entitlement document (`GET .../entitlements?all=true`) is cached and revalidated with If-None-Match, so
 * `check` of any feature is answered locally within the TTL.
 */
export class EvalClient {
  readonly #transport: Transport;
  readonly #options: EvalClientOptions;
  readonly #cache = new Map<string, Cached>();
  readonly #inFlight = new Map<string, PendingFetch>();
  /**
   * Each feature's kind as the last document that held it said: a feature's kind is the catalog's, the same for every
   * subscriber, so a fallback names it even for a subscriber never read (else it follows the fallback value's type).
   */
  readonly #kinds = new Map<string, Entitlement['kind']>();
  #lastUsage: EvalUsage | null = null;

  constructor(options: EvalClientOptions) {
    this.#options = options;
    this.#transport = new Transport(options);
  }

  /** The eval usage headers of the last response from the service. */
  get lastUsage(): EvalUsage | null {
    return this.#lastUsage;
  }

  async list(subscriberId: string): Promise<ListAnswer> {
    this.#transport.assertOpen();
    try {
      const doc = await this.#document(subscriberId);
      return { subscriber_id: subscriberId, entitlements: doc.entitlements, stale: false, usage: doc.usage };
    } catch (error) {
      const stale = this.#staleFor(error)?.get(subscriberId);
      if (!stale) throw error;
      return { subscriber_id: subscriberId, entitlements: stale.entitlements, stale: true, usage: null };
    }
  }

  /**
   * May the subscriber use the feature? Answered from the cached document within the TTL. With `consume` (metered
   * features), deducts atomically on the service: always a request, never the cache.
   */
  check(
    subscriberId: string,
    feature: string,
    options: CheckOptions & { consume: number },
  ): Promise<ConsumeAnswer>;
  check(subscriberId: string, feature: string, options?: CheckOptions): Promise<CheckAnswer>;
  async check(subscriberId: string, feature: string, options: CheckOptions = {}): Promise<CheckAnswer> {
    this.#transport.assertOpen();
    if (options.consume !== undefined) {
      return this.#consume(subscriberId, feature, options.consume, options.idempotencyKey ?? randomUUID());
    }
    // A feature made since the cached document was read is not in it: a key it lacks is asked about once more (a
    // conditional request: 304, not an eval, when nothing changed) before it is called unknown; once per key and
    // document, so a mistyped key in a loop costs no request per call (a 304 still passes the burst limit).
    for (let reread = false; ; reread = true) {
      const held = this.#cache.get(subscriberId);
      const fromCache = held !== undefined && Date.now() < held.freshUntil;
      let doc: Cached;
      try {
        doc = await this.#document(subscriberId);
      } catch (error) {
        if (!isOutage(error)) throw error;
        // The document read last lacked the key: unknown, as it said, not an outage's fallback.
        if (reread) throw unknownFeature(feature);
        const staleDocument = this.#staleFor(error)?.get(subscriberId);
        const stale = staleDocument?.byFeature.get(feature);
        if (stale) return { ...answerOf(stale), stale: true, usage: null, error };
        // The stale document this client would answer from lacks the key: unknown, as it said, not a fallback.
        // (With serveStale false, no stale document speaks: the fallback.)
        if (staleDocument !== undefined) throw unknownFeature(feature);
        return this.#fallback(feature, error);
      }
      const entitlement = doc.byFeature.get(feature);
      if (entitlement) return { ...answerOf(entitlement), stale: false, usage: doc.usage, error: null };
      if (fromCache && !reread && !doc.reasked.has(feature)) {
        doc.reasked.add(feature);
        doc.freshUntil = 0;
        continue;
      }
      throw unknownFeature(feature);
    }
  }

  /**
   * Reports usage that already happened (`{ delta }` or `{ set }`); never refused for being over the limit. Not
   * an eval. Thrown when it could not be applied: `error.idempotencyKey` sends it again safely.
   */
  report(
    subscriberId: string,
    feature: string,
    amount: UsageAmount,
    options: { idempotencyKey?: string } = {},
  ): Promise<ReportAnswer> {
    return reportUsage(this.#transport, subscriberId, feature, amount, options.idempotencyKey);
  }

  /** Reports many events in batches of at most 1,000 (one request each, in order); see `reportUsageEvents`. */
  reportMany(events: readonly UsageEventInput[]): Promise<UsageBatchAnswer> {
    return reportUsageEvents(this.#transport, events);
  }

  /**
   * Drops a subscriber's cached document (e.g. after a write of yours), or all of them. A request already in
   * flight may have read before the write: later calls do not join it, and its answer is not cached (it still
   * answers the calls made before the invalidation).
   */
  invalidate(subscriberId?: string): void {
    if (subscriberId === undefined) {
      for (const pending of this.#inFlight.values()) pending.invalidated = true;
      this.#inFlight.clear();
      this.#cache.clear();
      return;
    }
    const pending = this.#inFlight.get(subscriberId);
    if (pending) pending.invalidated = true;
    this.#inFlight.delete(subscriberId);
    this.#cache.delete(subscriberId);
  }

  async close(): Promise<void> {
    await this.#transport.close();
  }

  /** The cache to answer stale from, when the failure means the service cannot answer now. */
  #staleFor(error: unknown): Map<string, Cached> | null {
    if (this.#options.serveStale === false) return null;
    if (!isOutage(error)) return null;
    return this.#cache;
  }

  /** A consume: one request, its key on every retry; an outage answers the fallback (nothing was deducted). */
  async #consume(
    subscriberId: string,
    feature: string,
    consume: number,
    idempotencyKey: string,
  ): Promise<ConsumeAnswer> {
    try {
      const reply = await this.#transport.send(
        'POST',
        `/org/subscribers/${encodeURIComponent(subscriberId)}/entitlements/check`,
        { body: { feature, consume }, idempotencyKey, answers: isCheckResult },
      );
      if (reply.usage) this.#lastUsage = reply.usage;
      const answer = answerOf(reply.body as Entitlement);
      return {
        ...answer,
        stale: false,
        usage: reply.usage,
        error: null,
        idempotencyKey,
        replayed: reply.replayed,
      };
    } catch (error) {
      if (!isOutage(error)) throw error;
      return { ...this.#fallback(feature, error, consume), idempotencyKey, replayed: false };
    }
  }

  /** `amount`: a consume's, which a numeric fallback must cover to be allowed (else the fail mode decides). */
  #fallback(feature: string, error: EntitlementsError, amount?: number): CheckAnswer {
    const options = this.#options;
    const base = {
      feature,
      source: null,
      metered: null,
      fallback: true,
      stale: false,
      usage: null,
      error,
    } as const;
    const fallbacks = options.fallbacks ?? {};
    const value = Object.hasOwn(fallbacks, feature) ? fallbacks[feature] : options.defaultFallback;
    const known = this.#kinds.get(feature);
    const failModes = options.failModes ?? {};
    // Own entries only: `constructor` or `toString` are valid feature keys, and every object inherits them.
    const failMode = Object.hasOwn(failModes, feature) ? failModes[feature] : undefined;
    const open = (failMode ?? options.defaultFailMode ?? 'closed') === 'open';
    if (value !== undefined) {
      if (typeof value === 'boolean')
        return { ...base, kind: known ?? 'flag', allowed: value, limit: value ? null : 0 };
      // A consume's amount the number does not cover is left to the fail mode (docs/sdk.md); a check asks for 1.
      const covered = value === null || value >= (amount ?? 1);
      return {
        ...base,
        kind: known ?? 'limit',
        allowed: covered || (amount !== undefined && open),
        limit: value,
      };
    }
    return { ...base, kind: known ?? null, allowed: open, limit: open ? null : 0 };
  }

  async #document(subscriberId: string): Promise<Cached> {
    const cached = this.#cache.get(subscriberId);
    if (cached && Date.now() < cached.freshUntil) {
      // Re-inserted so the Map's order is least recently used first.
      this.#cache.delete(subscriberId);
      this.#cache.set(subscriberId, cached);
      return cached;
    }
    // Concurrent checks of one subscriber share one request.
    const joined = this.#inFlight.get(subscriberId);
    if (joined) return joined.promise;
    const state = { invalidated: false };
    const promise = this.#fetch(subscriberId, cached, state).finally(() => {
      // After an invalidation the entry may already be a newer request's, which later calls must still join.
      if (this.#inFlight.get(subscriberId)?.promise === promise) this.#inFlight.delete(subscriberId);
    });
    this.#inFlight.set(subscriberId, Object.assign(state, { promise }));
    return promise;
  }

  async #fetch(
    subscriberId: string,
    cached: Cached | undefined,
    state: Pick<PendingFetch, 'invalidated'>,
  ): Promise<Cached> {
    const reply = await this.#transport.send(
      'GET',
      `/org/subscribers/${encodeURIComponent(subscriberId)}/entitlements?all=true`,
      { ifNoneMatch: cached?.etag ?? null, answers: holdsArray('entitlements') },
    );
    if (reply.usage) this.#lastUsage = reply.usage;
    const ttl = this.#options.cacheTtlMs ?? 30_000;
    let next: Cached;
    if (reply.status === 304 && cached) {
      next = { ...cached, usage: reply.usage ?? cached.usage, freshUntil: Date.now() + ttl };
    } else {
      const body = reply.body as ListBody;
      for (const entry of body.entitlements) this.#kinds.set(entry.feature, entry.kind);
      next = {
        entitlements: body.entitlements,
        byFeature: new Map(body.entitlements.map((entry) => [entry.feature, entry])),
        etag: reply.etag,
        usage: reply.usage,
        freshUntil: Date.now() + ttl,
        reasked: new Set(),
      };
    }
    if (state.invalidated) return next;
    this.#cache.delete(subscriberId);
    this.#cache.set(subscriberId, next);
    const max = this.#options.maxCachedSubscribers ?? 10_000;
    while (this.#cache.size > max) this.#cache.delete(this.#cache.keys().next().value!);
    return next;
  }
}

const unknownFeature = (feature: string) =>
  new EntitlementsError({
    code: 'NOT_FOUND',
    message: `No feature with key "${feature}".`,
    details: { field: 'feature', value: feature },
  });

function answerOf(entry: Entitlement): Omit<CheckAnswer, 'stale' | 'usage' | 'error'> {
  if (entry.kind === 'flag') {
    return {
      feature: entry.feature,
      kind: 'flag',
      allowed: entry.allowed,
      limit: entry.allowed ? null : 0,
      source: entry.source,
      metered: null,
      fallback: false,
    };
  }
  if (entry.kind === 'metered') {
    const { used, remaining, period_start, resets_at, overage, credits } = entry;
    return {
      feature: entry.feature,
      kind: 'metered',
      allowed: entry.allowed,
      limit: entry.limit,
      source: entry.source,
      metered: {
        used,
        remaining,
        period_start,
        resets_at,
        ...(overage === undefined ? {} : { overage }),
        // A service older than credits sends none: the same as holding none.
        credits: credits ?? [],
      },
      fallback: false,
    };
  }
  return {
    feature: entry.feature,
    kind: 'limit',
    allowed: entry.limit === null || entry.limit > 0,
    limit: entry.limit,
    source: entry.source,
    metered: null,
    fallback: false,
  };
}
