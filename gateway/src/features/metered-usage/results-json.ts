import type { UsageEventsResult } from '@ent/contract/metered-usage';
import {
  meteredResultJson,
  sharedResultTextOf,
  sharesResultText,
  type SharedResultText,
} from '../shared/metered-result-json.ts';

/**
 * The batch route's body as JSON text, written as `JSON.stringify` writes it. Its results are meteredResultIn's
 * objects (fields in the schema's order) or error bodies. A batch's results mostly share their feature, limit, period
 * and source: the text of those fields is made once per run of results that share them (metered-result-json.ts).
 */
export function usageEventsJson(results: UsageEventsResult['results']): string {
  const parts: string[] = new Array(results.length);
  let shared: SharedResultText | undefined;
  for (let i = 0; i < results.length; i++) {
    const item = results[i]!;
    if ('error' in item) {
      parts[i] = JSON.stringify(item);
      continue;
    }
    if (shared === undefined || !sharesResultText(shared, item)) shared = sharedResultTextOf(item);
    parts[i] = meteredResultJson(item, shared);
  }
  return `{"results":[${parts.join(',')}]}`;
}
