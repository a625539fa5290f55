import {
  compareCredits,
  liveCreditsOf,
  rolloverCreditId,
  rolloverCreditOf,
} from '@ent/common/metering/credits';
import { meteredPeriodAt, type MeteredPeriod } from '@ent/common/metering/metered-period';
import { creditDirtyMember, meteredMember, type RedisKeys } from '@ent/common/redis/keys';
import { meteredTermsOf, type MeteredTerms } from '@ent/common/resolve/resolve';
import type { CatalogDoc, CreditDoc, SubscriberDoc } from '@ent/common/snapshots/documents';

/**
 * The credits one metered operation spends (issue 35), as metered-balance.fragment.lua takes them: the live credits
 * at the app clock in spending order, and the period's rollover credit, whose amount only Redis knows.
 */

/** id, amount (null: the period's rollover, its amount is the balance's `ro`), expiry (epoch ms, null = never). */
export type OperationCredit = readonly [id: string, amount: number | null, expiresAt: number | null];

export const NO_OPERATION_CREDITS: readonly OperationCredit[] = Object.freeze([]);
const NONE = Object.freeze({ spec: '', list: NO_OPERATION_CREDITS });

/** The snapshot documents an operation is resolved from. */
interface Documents {
  catalog: CatalogDoc;
  subscriber: SubscriberDoc;
}

/**
 * The rollover lines of the spec: where the previous period's balance is and what it allowed, so the script can make
 * this period's rollover when it first creates the balance. Empty when no subscription of the grant's plan covered
 * the previous period (a subscriber that subscribed this period gets no rollover from before it).
 */
function rolloverLines(
  docs: Documents,
  subscriberId: string,
  feature: string,
  terms: MeteredTerms,
  period: MeteredPeriod,
  creditId: string,
): string[] {
  const subscribedAt = terms.planId === null ? undefined : docs.subscriber.subscribedAt?.[terms.planId];
  if (subscribedAt === undefined || subscribedAt >= period.startMs) return ['', '', '', creditId, '', ''];
  const previous = meteredPeriodAt(terms.reset, terms.anchorMs, period.startMs - 1);
  const previousLimit = meteredTermsOf(docs.catalog, docs.subscriber, feature, period.startMs - 1).limit;
  return [
    meteredMember(subscriberId, feature, previous.startMs),
    previousLimit === null ? '' : String(previousLimit),
    String(terms.rollover),
    creditId,
    String(previous.startMs),
    String(period.startMs),
  ];
}

/** The operation's credits: the script's spec ('' when none, so a subscriber without credits costs nothing). */
export function creditsSpec(
  docs: Documents,
  subscriberId: string,
  feature: string,
  terms: MeteredTerms,
  period: MeteredPeriod,
  nowMs: number,
  keys: RedisKeys,
  organizationId: string,
): { spec: string; list: readonly OperationCredit[] } {
  const live = liveCreditsOf(docs.subscriber, feature, nowMs);
  const rollsOver = terms.rollover !== null && period.endMs !== null;
  if (live.length === 0 && !rollsOver) return NONE;

  let ordered: readonly CreditDoc[] = live;
  let placeholder: CreditDoc | null = null;
  let rollover = ['', '', '', '', '', ''];
  if (rollsOver) {
    const id = rolloverCreditId(subscriberId, feature, period.startMs);
    rollover = rolloverLines(docs, subscriberId, feature, terms, period, id);
    // Once the worker has persisted it, the snapshot holds it as a stored credit: spent from there, not twice.
    if (!live.some((credit) => credit.id === id)) {
      placeholder = rolloverCreditOf(id, period.startMs, period.endMs!);
      ordered = [...live, placeholder].sort(compareCredits);
    }
  }
  const lines = [
    keys.creditSpent(organizationId, subscriberId, feature),
    creditDirtyMember(subscriberId, feature),
    ...rollover,
  ];
  const list: OperationCredit[] = [];
  for (const credit of ordered) {
    const amount = credit === placeholder ? null : credit.amount;
    lines.push(credit.id, amount === null ? '' : String(amount));
    list.push([credit.id, amount, credit.expiresAt]);
  }
  return { spec: lines.join('\n'), list };
}
