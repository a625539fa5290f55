import { createHash } from 'node:crypto';

import type { CreditDoc, SubscriberDoc } from '../snapshots/documents.ts';

/**
 * DESIGN.md §5 "Credits" (issue 35): which credits count at an instant, and the order usage spends them in.
 */

/** Live at `nowMs`: effective at or before it, expiring strictly after it (at `expiresAt` itself it has expired). */
export const isCreditLive = (credit: CreditDoc, nowMs: number): boolean =>
  credit.effectiveAt <= nowMs && (credit.expiresAt === null || credit.expiresAt > nowMs);

/** The spending order: priority ascending, soonest expiry (never last), oldest, then id. */
export function compareCredits(a: CreditDoc, b: CreditDoc): number {
  if (a.priority !== b.priority) return a.priority - b.priority;
  if (a.expiresAt !== b.expiresAt) {
    if (a.expiresAt === null) return 1;
    if (b.expiresAt === null) return -1;
    return a.expiresAt - b.expiresAt;
  }
  if (a.createdAt !== b.createdAt) return a.createdAt - b.createdAt;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** Sorted once per snapshot document: the document is immutable while cached, evals only filter it. */
const sortedByDocument = new WeakMap<CreditDoc[], CreditDoc[]>();

function sortedCredits(credits: CreditDoc[]): CreditDoc[] {
  let sorted = sortedByDocument.get(credits);
  if (sorted === undefined) {
    sorted = [...credits].sort(compareCredits);
    sortedByDocument.set(credits, sorted);
  }
  return sorted;
}

const NO_CREDITS: readonly CreditDoc[] = Object.freeze([]);

/**
 * The credits of `feature` live at `nowMs`, in spending order. A subscriber without credits costs nothing here: the
 * shared empty list is answered.
 */
export function liveCreditsOf(
  subscriber: SubscriberDoc,
  feature: string,
  nowMs: number,
): readonly CreditDoc[] {
  const credits = subscriber.credits?.[feature];
  if (credits === undefined || credits.length === 0) return NO_CREDITS;
  const live = sortedCredits(credits).filter((credit) => isCreditLive(credit, nowMs));
  return live.length === 0 ? NO_CREDITS : live;
}

/** The priority of a rollover credit (a stored credit's default). */
export const ROLLOVER_PRIORITY = 10;

/**
 * The id of the credit a period's rollover creates: `cr_ro_<period start ms>_<16 hex of sha1(subscriber|feature)>`,
 * the same on every gateway and in the worker, so it is created and persisted once per (subscriber, feature, period).
 */
export const rolloverCreditId = (subscriberId: string, feature: string, periodStartMs: number): string =>
  `cr_ro_${periodStartMs}_${createHash('sha1').update(`${subscriberId}|${feature}`).digest('hex').slice(0, 16)}`;

/**
 * The rollover credit of the period [startMs, endMs) as the spending order sees it (its amount is Redis's, so it is
 * not known here): priority 10, created and effective at the period start, expiring at its end.
 */
export const rolloverCreditOf = (id: string, startMs: number, endMs: number): CreditDoc => ({
  id,
  amount: 0,
  priority: ROLLOVER_PRIORITY,
  effectiveAt: startMs,
  expiresAt: endMs,
  createdAt: startMs,
});
