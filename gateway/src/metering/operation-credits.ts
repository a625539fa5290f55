import type { SpendingCredit } from '@ent/common/metering/credit-answer';
import {
  NO_CREDITS,
  buildCreditsSpec,
  type Documents,
  type OperationCredits,
} from '@ent/common/metering/credit-spec';
import type { MeteredPeriod } from '@ent/common/metering/metered-period';
import { creditBalanceDirtyMember, creditOwner, meteredMember, type RedisKeys } from '@ent/common/redis/keys';
import type { MeteredTerms } from '@ent/common/resolve/resolve';
import type { CatalogDoc, CreditDoc, SubscriberDoc } from '@ent/common/snapshots/documents';

/**
 * The credits one metered operation spends (issue 35), as metered-balance.fragment.lua takes them
 * (common/src/metering/credit-spec.ts builds them), kept per subscriber document while the same credits are live.
 */

/** id, amount (null: the period's rollover, its amount is the balance's `ro`), expiry (ISO 8601, null = never). */
export type OperationCredit = SpendingCredit;
export type { OperationCredits };

export const NO_OPERATION_CREDITS: readonly OperationCredit[] = NO_CREDITS.list;

/**
 * The rendering terms a keyed operation's record keeps: `encoded` (operationTermsOf's JSON array), and with credits a
 * sixth element listing them, so a replay lists the credits of its time. Written per keyed operation, not kept with
 * the list: a gateway keeps a list per subscriber and credited feature it answers, and the list's JSON, once kept
 * with every list, was a tenth of what a subscriber holding credits cost its heap (the record it goes into is a Redis
 * write anyway).
 */
export function renderingTermsWith(encoded: string, list: readonly OperationCredit[]): string {
  return list.length === 0 ? encoded : `${encoded.slice(0, -1)},${JSON.stringify(list)}]`;
}

/**
 * What an operation's credits were last built as, per subscriber document and feature: the same until the period
 * changes or a credit becomes effective or expires (`until`), so consumes with credits build no text per request.
 */
interface CachedCredits extends OperationCredits {
  /** The catalog it was built with: a rollover's max and the previous limit come from it. */
  catalog: CatalogDoc;
  organizationId: string;
  subscriberId: string;
  periodStartMs: number;
  from: number;
  until: number;
}
const cache = new WeakMap<SubscriberDoc, Map<string, CachedCredits>>();

/** The next instant after `nowMs` at which one of `credits` becomes effective or expires (Infinity: none). */
function nextChange(credits: readonly CreditDoc[] | undefined, nowMs: number): number {
  let next = Number.POSITIVE_INFINITY;
  for (const credit of credits ?? []) {
    if (credit.effectiveAt > nowMs && credit.effectiveAt < next) next = credit.effectiveAt;
    if (credit.expiresAt !== null && credit.expiresAt > nowMs && credit.expiresAt < next)
      next = credit.expiresAt;
  }
  return next;
}

/** The key sets whose credit-spent hashes are where metered-credits.fragment.lua makes them, checked once each. */
const checkedKeys = new WeakSet<RedisKeys>();

/**
 * The script makes a credit-spent hash's key from the balance prefix and the spec's owner, and the dirty member of a
 * balance that met credits from the balance's member, so that the spec names no key; a key layout that no longer allows that fails here, at a gateway's first
 * credits, not in Redis's figures.
 */
function checkCreditSpentKey(keys: RedisKeys, organizationId: string, subscriberId: string, feature: string) {
  if (checkedKeys.has(keys)) return;
  const balancePrefix = keys.meteredBalance(organizationId, '');
  const owner = creditOwner(subscriberId, feature);
  const made = `${balancePrefix.slice(0, -2)}credit-spent:${owner}`;
  if (
    !balancePrefix.endsWith(':m:') ||
    made !== keys.creditSpent(organizationId, subscriberId, feature) ||
    creditBalanceDirtyMember(meteredMember(subscriberId, feature, 0)) !== `credit|${owner}|0`
  )
    throw new Error(
      `The credit-spent hash or its dirty member is not where metered-credits.fragment.lua makes it.`,
    );
  checkedKeys.add(keys);
}

/**
 * The operation's credits: the script's spec ('' when none, so a subscriber without credits costs nothing), built
 * once per subscriber document, feature and stretch of time in which the same credits are live.
 */
export function creditsSpec(
  docs: Documents,
  subscriberId: string,
  feature: string,
  terms: MeteredTerms,
  period: MeteredPeriod,
  nowMs: number,
  keys: RedisKeys,
  organizationId: string,
): OperationCredits {
  const credits = docs.subscriber.credits?.[feature];
  if ((credits === undefined || credits.length === 0) && terms.rollover === null) return NO_CREDITS;
  let byFeature = cache.get(docs.subscriber);
  const cached = byFeature?.get(feature);
  if (
    cached !== undefined &&
    cached.periodStartMs === period.startMs &&
    cached.catalog === docs.catalog &&
    cached.subscriberId === subscriberId &&
    cached.organizationId === organizationId &&
    nowMs >= cached.from &&
    nowMs < cached.until
  )
    return cached;
  const built = buildCreditsSpec(docs, subscriberId, feature, terms, period, nowMs);
  checkCreditSpentKey(keys, organizationId, subscriberId, feature);
  if (byFeature === undefined) {
    byFeature = new Map();
    cache.set(docs.subscriber, byFeature);
  }
  byFeature.set(feature, {
    spec: built.spec,
    list: built.list,
    catalog: docs.catalog,
    organizationId,
    subscriberId,
    periodStartMs: period.startMs,
    from: nowMs,
    until: nextChange(credits, nowMs),
  });
  return built;
}

/**
 * The credits section of a gate call (eval-gate-batch-8.lua): each distinct spec once, in order of first use, and an
 * operation's reference to its spec (0 = none, else the spec's place from 1). A spec is the subscriber's (its ids,
 * its hash), so only a subscriber's own operations share one: a call carrying several consumes of one busy subscriber
 * sends and parses its credits once.
 */
export class CreditSpecs {
  private readonly places = new Map<string, number>();
  private readonly specs: string[] = [];

  indexOf(spec: string): number {
    if (spec === '') return 0;
    let place = this.places.get(spec);
    if (place === undefined) {
      place = this.specs.push(spec);
      this.places.set(spec, place);
    }
    return place;
  }

  /** The section's arguments: the number of specs, then each spec. */
  pushTo(args: (string | number)[]): void {
    args.push(this.specs.length);
    for (const spec of this.specs) args.push(spec);
  }
}
