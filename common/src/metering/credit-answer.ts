import type { CheckCredit } from '@ent/contract/credits';
import type { CreditDoc, SubscriberDoc } from '../snapshots/documents.ts';
import { NO_METERED_CREDITS, type MeteredCredits } from '../resolve/resolve.ts';
import { compareCredits, liveCreditsOf, rolloverCreditId, rolloverCreditOf } from './credits.ts';

/**
 * The credits of one balance as a metered answer lists them (DESIGN.md §5 "Credits", issue 35): the same code for
 * the gateway's check result and admin's usage answers, so both list the same credits with the same figures.
 */

/** id, amount (null: the period's rollover, its amount is the balance's `ro`), expiry (ISO 8601, null = never). */
export type SpendingCredit = readonly [id: string, amount: number | null, expiresAt: string | null];

/** A balance's credit figures: what credits covered of `used`, the period's rollover, each credit's spent in order. */
export interface CreditFigures {
  covered: number;
  rollover: number;
  spent: readonly number[];
}

/**
 * The credits a period's usage spends at `nowMs`, in spending order: the live stored credits and, for a grant
 * that rolls over, the period's rollover credit while the snapshot does not hold it yet (`placeholder`: its
 * amount is the balance's `ro`). Once the worker has persisted it, the snapshot holds it as a stored credit: the
 * same id, never listed twice.
 */
export function creditsInSpendingOrder(
  subscriber: SubscriberDoc,
  subscriberId: string,
  feature: string,
  /** The period when its grant rolls over (and it ends), else null. */
  rolloverPeriod: { startMs: number; endMs: number } | null,
  nowMs: number,
): { ordered: readonly CreditDoc[]; placeholder: CreditDoc | null } {
  const live = liveCreditsOf(subscriber, feature, nowMs);
  if (rolloverPeriod === null) return { ordered: live, placeholder: null };
  const id = rolloverCreditId(subscriberId, feature, rolloverPeriod.startMs);
  if (live.some((credit) => credit.id === id)) return { ordered: live, placeholder: null };
  const placeholder = rolloverCreditOf(id, rolloverPeriod.startMs, rolloverPeriod.endMs);
  return { ordered: [...live, placeholder].sort(compareCredits), placeholder };
}

/** The answer's view of `ordered`: id, amount (null for the placeholder), expiry. */
export const spendingCreditsOf = (
  ordered: readonly CreditDoc[],
  placeholder: CreditDoc | null,
): SpendingCredit[] =>
  ordered.map((credit) => [
    credit.id,
    credit === placeholder ? null : credit.amount,
    credit.expiresAt === null ? null : new Date(credit.expiresAt).toISOString(),
  ]);

/**
 * The credits an answer lists: those of `list` with something left, with what is left, in the order given, and
 * what credits covered (the answer's `remaining` counts both). No figures: no credits.
 */
export function checkCreditsOf(
  list: readonly SpendingCredit[],
  figures: CreditFigures | undefined,
): MeteredCredits {
  if (figures === undefined) return NO_METERED_CREDITS;
  const credits: CheckCredit[] = [];
  list.forEach(([id, amount, expiresAt], i) => {
    const remaining = (amount ?? figures.rollover) - (figures.spent[i] ?? 0);
    if (remaining > 0) credits.push({ credit_id: id, remaining, expires_at: expiresAt });
  });
  return { covered: figures.covered, credits };
}
