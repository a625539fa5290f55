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
 * A credit as an answer lists it: the contract's three fields, its own and only enumerable ones (JSON, equality and
 * copies see a plain CheckCredit), and its JSON text, written once. A consume that spends a credit changes one
 * credit's remaining, so the next answer of the same list reuses the others as they were, text included, and the one
 * that changed is written from the text it was made from: writing an answer's credits then costs one number, not
 * five objects.
 * What a credit keeps is one flat text and where its remaining lies in it: a gateway keeps a list's credits for each
 * subscriber and credited feature it answers, so the text is made by a join (one flat string), not by `+` (a rope of
 * its pieces, several objects each), and the id's and expiry's ends are not kept apart from it.
 */
export class ListedCredit implements CheckCredit {
  readonly credit_id: string;
  readonly remaining: number;
  readonly expires_at: string | null;
  /** `{"credit_id":…,"remaining":<remaining>,"expires_at":…}`, once written. */
  #text: string | undefined;
  /** Where the remaining figure starts and ends in #text (or, before it is written, in #from). */
  #remainingAt = 0;
  #remainingEnd = 0;
  /** The text of the credit this one was made from with another remaining (withRemaining), until #text is written. */
  #from: string | undefined;
  /** The kept list that ends with this credit (ListedCredit.keepListText), and its text once written. */
  #endsList: readonly CheckCredit[] | undefined;
  #endsListText: string | undefined;

  constructor(creditId: string, remaining: number, expiresAt: string | null) {
    this.credit_id = creditId;
    this.remaining = remaining;
    this.expires_at = expiresAt;
  }

  /** The same credit with another remaining. */
  withRemaining(remaining: number): ListedCredit {
    const credit = new ListedCredit(this.credit_id, remaining, this.expires_at);
    const from = this.#text ?? this.#from;
    if (from !== undefined) {
      credit.#from = from;
      credit.#remainingAt = this.#remainingAt;
      credit.#remainingEnd = this.#remainingEnd;
    }
    return credit;
  }

  /** What `JSON.stringify` writes for this credit (its fields in the schema's order; remaining is finite). */
  jsonText(): string {
    if (this.#text !== undefined) return this.#text;
    const remaining = String(this.remaining);
    let head: string;
    let tail: string;
    if (this.#from !== undefined) {
      head = this.#from.slice(0, this.#remainingAt);
      tail = this.#from.slice(this.#remainingEnd);
      this.#from = undefined;
    } else {
      head = `{"credit_id":${JSON.stringify(this.credit_id)},"remaining":`;
      tail = `,"expires_at":${this.expires_at === null ? 'null' : JSON.stringify(this.expires_at)}}`;
    }
    this.#remainingAt = head.length;
    this.#remainingEnd = head.length + remaining.length;
    this.#text = [head, remaining, tail].join('');
    return this.#text;
  }

  /**
   * Keeps `credits`' text, once written, with its last credit: for a list that answers again and again (a
   * subscriber's list while only the allowance is spent). Only such lists: a consume that spends makes a new list per
   * answer, and its text kept by a long-lived credit would live until that subscriber's next answer, seconds later,
   * long enough to be promoted to the old generation (most of what spending a credit cost the gateway was that GC).
   */
  static keepListText(credits: readonly CheckCredit[]): void {
    const last = credits[credits.length - 1];
    if (!(last instanceof ListedCredit) || last.#endsList === credits) return;
    last.#endsList = credits;
    last.#endsListText = undefined;
  }

  /**
   * What `JSON.stringify` writes for `credits`. A kept list's text (keepListText) is written once: the answers that
   * share that list write nothing again, and keeping it costs no WeakMap key per list.
   */
  static listJsonText(credits: readonly CheckCredit[]): string {
    if (credits.length === 0) return '[]';
    const last = credits[credits.length - 1];
    const kept = last instanceof ListedCredit && last.#endsList === credits;
    if (kept && last.#endsListText !== undefined) return last.#endsListText;
    if (!kept) {
      // Written once: a rope, flattened only as the answer is written out (no array, no flat copy of its own).
      let text = `[${textOf(credits[0]!)}`;
      for (let i = 1; i < credits.length; i++) text += `,${textOf(credits[i]!)}`;
      return `${text}]`;
    }
    // join, not +=: a flat string, which each answer that reuses it copies as it is (a rope is walked every time).
    const texts: string[] = new Array(credits.length);
    for (let i = 0; i < credits.length; i++) texts[i] = textOf(credits[i]!);
    texts[0] = `[${texts[0]!}`;
    texts[texts.length - 1] += ']';
    const text = texts.join(',');
    last.#endsListText = text;
    return text;
  }
}

const textOf = (credit: CheckCredit) =>
  credit instanceof ListedCredit ? credit.jsonText() : JSON.stringify(credit);

/**
 * The credits an answer lists: those of `list` with something left, with what is left, in the order given, and
 * what credits covered (the answer's `remaining` counts both). No figures: no credits. `previous`, an earlier
 * answer's credits of the same list, lends the credits whose figures did not move (the same objects).
 */
/** No earlier answer to lend credits from (shared: the default allocates nothing). */
const NO_PREVIOUS_CREDITS: readonly CheckCredit[] = Object.freeze([]);

export function checkCreditsOf(
  list: readonly SpendingCredit[],
  figures: CreditFigures | undefined,
  previous: readonly CheckCredit[] = NO_PREVIOUS_CREDITS,
): MeteredCredits {
  if (figures === undefined) return NO_METERED_CREDITS;
  const credits: CheckCredit[] = [];
  let from = 0; // both list in the same order: previous is searched from after the last credit it lent
  for (let i = 0; i < list.length; i++) {
    const [id, amount, expiresAt] = list[i]!;
    const remaining = (amount ?? figures.rollover) - (figures.spent[i] ?? 0);
    if (remaining <= 0) continue;
    let at = from;
    while (at < previous.length && previous[at]!.credit_id !== id) at++;
    const before = previous[at];
    if (before instanceof ListedCredit && before.expires_at === expiresAt) {
      from = at + 1;
      credits.push(before.remaining === remaining ? before : before.withRemaining(remaining));
    } else credits.push(new ListedCredit(id, remaining, expiresAt));
  }
  return { covered: figures.covered, credits };
}
