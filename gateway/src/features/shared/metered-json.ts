import type { CheckCredit } from '@ent/contract/credits';
import type { MeteredCheckResult } from '@ent/contract/evals';

/**
 * A metered check result's JSON text, its credit list written once per list: the answers of a subscriber's consumes
 * that spend only the allowance share one list (meteredCreditsOf), and writing its five objects with their instants
 * was about a third of what credits added to such an answer's gateway CPU.
 */
const creditsTexts = new WeakMap<readonly CheckCredit[], string>();

const NO_CREDITS: CheckCredit[] = [];
const EMPTY_CREDITS_END = ',"credits":[]}';

function creditsJson(credits: readonly CheckCredit[]): string {
  let text = creditsTexts.get(credits);
  if (text === undefined) {
    text = JSON.stringify(credits);
    creditsTexts.set(credits, text);
  }
  return text;
}

/** `JSON.stringify(result)`, with the text of its credit list (the last field, as meteredResultIn writes it) kept. */
export function meteredResultJson(result: MeteredCheckResult): string {
  const { credits } = result;
  if (credits.length === 0) return JSON.stringify(result);
  // The rest of the result is written with an empty list in its place (the same shape: no copy of the object), and the
  // list's kept text goes where that list ends the text.
  result.credits = NO_CREDITS;
  const text = JSON.stringify(result);
  result.credits = credits;
  if (!text.endsWith(EMPTY_CREDITS_END)) return JSON.stringify(result);
  return `${text.slice(0, -1 - '[]'.length)}${creditsJson(credits)}}`;
}
