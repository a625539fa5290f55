import type { MeteredReset, MeteredResetAnchor } from '../api/types.ts';
import { formatLimit } from './format.ts';

/** What a metered limit is counted against: its period and whether use beyond it is allowed. */
export interface MeteredTerms {
  limit: number | null;
  reset: MeteredReset;
  reset_anchor: MeteredResetAnchor;
  soft: boolean;
}

/** The choices the grant editor offers, in the order it lists them. */
export const RESET_CHOICES: readonly { value: MeteredReset; label: string }[] = [
  { value: 'day', label: 'every day' },
  { value: 'week', label: 'every week (from Monday)' },
  { value: 'month', label: 'every month' },
  { value: 'year', label: 'every year' },
  { value: 'never', label: 'never' },
];

export const ANCHOR_CHOICES: readonly { value: MeteredResetAnchor; label: string }[] = [
  { value: 'calendar', label: 'calendar (UTC)' },
  { value: 'subscription', label: "subscription's start" },
];

/**
 * A metered grant as one phrase: `1,000 / month, soft`, `unlimited / day`, `500 / month from subscription
 * start`, `20, never resets`. The anchor is named only when it is not the calendar, and not for `never` (a period
 * that never ends has nothing to anchor).
 */
export function meteredTermsText(terms: MeteredTerms): string {
  const limit = formatLimit(terms.limit);
  const period =
    terms.reset === 'never'
      ? `${limit}, never resets`
      : `${limit} / ${terms.reset}${terms.reset_anchor === 'subscription' ? ' from subscription start' : ''}`;
  return terms.soft ? `${period}, soft` : period;
}
