import { rolloverCreditId } from './credits.ts';
import { creditsInSpendingOrder, spendingCreditsOf, type SpendingCredit } from './credit-answer.ts';
import { meteredPeriodAt, type MeteredPeriod } from './metered-period.ts';
import { creditOwner } from '../redis/keys.ts';
import { meteredTermsOf, type MeteredTerms } from '../resolve/resolve.ts';
import type { CatalogDoc, SubscriberDoc } from '../snapshots/documents.ts';

/**
 * The credits of one balance as metered-credits.fragment.lua takes them (issue 35): the live credits at a time in
 * spending order, the period's rollover credit (whose amount only Redis knows), and the rollover lines that let the
 * script make that credit when it first creates the period's balance. The gateway sends it with every operation on a
 * balance with credits; admin with a correction, so that a correction follows the same rule.
 */

/** The script's spec ('' when none) and the answer's list: id, amount (null: the period's rollover), expiry. */
export interface OperationCredits {
  spec: string;
  list: readonly SpendingCredit[];
}
export const NO_CREDITS: OperationCredits = Object.freeze({ spec: '', list: Object.freeze([]) });

/** The snapshot documents an operation is resolved from. */
export interface Documents {
  catalog: CatalogDoc;
  subscriber: SubscriberDoc;
}

/**
 * The rollover lines of the spec: what the previous period allowed and where it started (its balance is the owner's
 * member of that start), so the script can make this period's rollover when it first creates the balance. None when
 * no subscription of the grant's plan covered the previous period (a subscriber that subscribed this period gets no
 * rollover from before it).
 */
function rolloverLines(
  docs: Documents,
  feature: string,
  terms: MeteredTerms,
  period: MeteredPeriod,
  creditId: string,
): string[] {
  const subscribedAt = terms.planId === null ? undefined : docs.subscriber.subscribedAt?.[terms.planId];
  if (subscribedAt === undefined || subscribedAt >= period.startMs) return [];
  const previous = meteredPeriodAt(terms.reset, terms.anchorMs, period.startMs - 1);
  const previousLimit = meteredTermsOf(docs.catalog, docs.subscriber, feature, period.startMs - 1).limit;
  return [
    previousLimit === null ? '' : String(previousLimit),
    String(terms.rollover),
    creditId,
    String(previous.startMs),
    String(period.startMs),
  ];
}

/** The spec of (subscriber, feature) in `period` at `nowMs`: built afresh (the gateway keeps what it built). */
export function buildCreditsSpec(
  docs: Documents,
  subscriberId: string,
  feature: string,
  terms: MeteredTerms,
  period: MeteredPeriod,
  nowMs: number,
): OperationCredits {
  const rollsOver = terms.rollover !== null && period.endMs !== null;
  const { ordered, placeholder } = creditsInSpendingOrder(
    docs.subscriber,
    subscriberId,
    feature,
    rollsOver ? { startMs: period.startMs, endMs: period.endMs! } : null,
    nowMs,
  );
  if (ordered.length === 0) return NO_CREDITS;
  const list = spendingCreditsOf(ordered, placeholder);
  // metered-credits.fragment.lua's layout: the owner (the script makes the credit-spent hash and its dirty member from
  // it: no key prefix sent), the count (so the ids are split only when read or spent), the ids and the amounts one
  // line each, the rollover lines last and only when a rollover may be made.
  const lines = [
    creditOwner(subscriberId, feature),
    String(list.length),
    list.map(([id]) => id).join(' '),
    list.map(([, amount]) => (amount === null ? '-' : String(amount))).join(' '),
  ];
  if (rollsOver)
    lines.push(
      ...rolloverLines(docs, feature, terms, period, rolloverCreditId(subscriberId, feature, period.startMs)),
    );
  return { spec: lines.join('\n'), list };
}
