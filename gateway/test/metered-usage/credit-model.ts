/**
 * A plain model of DESIGN.md §5 "Credits" (issue 35), written from the documented rule and not from the Lua: usage
 * spends the period's allowance first, then the live credits by priority, soonest expiry (never last), oldest, id; a
 * hard consume that does not fit both is refused whole; anything else beyond them is overage; an unlimited limit
 * never touches credits; usage given back returns in the reverse order: overage first, then the credits (last spent
 * first), then the allowance.
 */

export interface ModelCredit {
  id: string;
  amount: number;
  priority: number;
  effectiveAt: number;
  expiresAt: number | null;
  createdAt: number;
}

export interface ModelState {
  used: number;
  /** Usage of the period the credits covered. */
  covered: number;
  /** Credit id -> spent. */
  spent: Map<string, number>;
}

export type ModelOperation =
  { kind: 'r' } | { kind: 'c' | 'd'; amount: number } | { kind: 's'; amount: number };

export interface ModelTerms {
  limit: number | null;
  soft: boolean;
}

export const modelState = (): ModelState => ({ used: 0, covered: 0, spent: new Map() });

/** The credits that count at `now`, in the order usage spends them. */
function spendingOrder(credits: readonly ModelCredit[], now: number): ModelCredit[] {
  const live = credits.filter(
    (credit) => credit.effectiveAt <= now && (credit.expiresAt === null || now < credit.expiresAt),
  );
  const expiry = (credit: ModelCredit) => credit.expiresAt ?? Number.POSITIVE_INFINITY;
  return live.sort((a, b) => {
    if (a.priority !== b.priority) return a.priority < b.priority ? -1 : 1;
    if (expiry(a) !== expiry(b)) return expiry(a) < expiry(b) ? -1 : 1;
    if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1;
    return a.id < b.id ? -1 : 1;
  });
}

/** Applies one operation to `state` (in place); answers whether it was applied (false: a refused consume). */
export function applyModel(
  state: ModelState,
  terms: ModelTerms,
  credits: readonly ModelCredit[],
  now: number,
  operation: ModelOperation,
): boolean {
  const order = spendingOrder(credits, now);
  const left = (credit: ModelCredit) => credit.amount - (state.spent.get(credit.id) ?? 0);
  let change = 0;
  if (operation.kind === 'c' || operation.kind === 'd') change = operation.amount;
  if (operation.kind === 's') change = operation.amount - state.used;

  if (change > 0) {
    if (terms.limit === null) {
      state.used += change;
      return true;
    }
    const allowance = Math.max(0, terms.limit - (state.used - state.covered));
    let rest = change - Math.min(change, allowance);
    const takes: [string, number][] = [];
    for (const credit of order) {
      if (rest === 0) break;
      const take = Math.min(rest, Math.max(0, left(credit)));
      if (take > 0) takes.push([credit.id, take]);
      rest -= take;
    }
    if (operation.kind === 'c' && !terms.soft && rest > 0) return false;
    state.used += change;
    for (const [id, take] of takes) {
      state.spent.set(id, (state.spent.get(id) ?? 0) + take);
      state.covered += take;
    }
    return true;
  }
  if (change < 0) {
    const back = Math.min(-change, state.used);
    // Overage (beyond the allowance and the credits) was spent last, so it is given back first.
    const overage = terms.limit === null ? 0 : Math.max(0, state.used - state.covered - terms.limit);
    let give = Math.min(Math.max(0, back - overage), state.covered);
    let returned = 0;
    for (const credit of [...order].reverse()) {
      const take = Math.min(give, state.spent.get(credit.id) ?? 0);
      if (take > 0) state.spent.set(credit.id, state.spent.get(credit.id)! - take);
      give -= take;
      returned += take;
    }
    state.used -= back;
    state.covered = Math.min(state.covered - returned, state.used);
  }
  return true;
}

/** What the check result says of a state: remaining (null when unlimited), overage, the credits listed. */
export function modelAnswer(
  state: ModelState,
  terms: ModelTerms,
  credits: readonly ModelCredit[],
  now: number,
): {
  remaining: number | null;
  overage: number | undefined;
  credits: { credit_id: string; remaining: number }[];
} {
  const listed = spendingOrder(credits, now)
    .map((credit) => ({ credit_id: credit.id, remaining: credit.amount - (state.spent.get(credit.id) ?? 0) }))
    .filter((credit) => credit.remaining > 0);
  const fromAllowance = state.used - state.covered;
  const remaining =
    terms.limit === null
      ? null
      : Math.max(0, terms.limit - fromAllowance) + listed.reduce((sum, credit) => sum + credit.remaining, 0);
  const overage = terms.soft
    ? terms.limit === null
      ? 0
      : Math.max(0, fromAllowance - terms.limit)
    : undefined;
  return { remaining, overage, credits: listed };
}
