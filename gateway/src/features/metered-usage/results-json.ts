import type { MeteredCheckResult } from '@ent/contract/evals';
import type { UsageEventsResult } from '@ent/contract/metered-usage';

/**
 * The batch route's body as JSON text, written as `JSON.stringify` writes it. Its results are meteredResultIn's
 * objects (fields in the schema's order) or error bodies. A batch's results mostly share their feature, limit, period
 * and source: the text of those fields is made once per run of results that share them, and each result adds its
 * figures, where `JSON.stringify` would walk eleven fields and quote five strings per result.
 */
interface SharedText {
  feature: string;
  limit: number | null;
  periodStart: string;
  resetsAt: string | null;
  source: string;
  /** `{"feature":…,"kind":"metered","limit":…,"used":` */
  head: string;
  /** `,"period_start":…,"resets_at":…,"source":…` */
  tail: string;
}

function sharedTextOf(result: MeteredCheckResult): SharedText {
  return {
    feature: result.feature,
    limit: result.limit,
    periodStart: result.period_start,
    resetsAt: result.resets_at,
    source: result.source,
    head: `{"feature":${JSON.stringify(result.feature)},"kind":"metered","limit":${result.limit},"used":`,
    tail:
      `,"period_start":${JSON.stringify(result.period_start)},"resets_at":${JSON.stringify(result.resets_at)}` +
      `,"source":${JSON.stringify(result.source)}`,
  };
}

const shares = (text: SharedText, result: MeteredCheckResult) =>
  text.feature === result.feature &&
  text.limit === result.limit &&
  text.periodStart === result.period_start &&
  text.resetsAt === result.resets_at &&
  text.source === result.source;

/** `{"results":[…]}` for results in the events' order. */
export function usageEventsJson(results: UsageEventsResult['results']): string {
  const parts: string[] = new Array(results.length);
  let shared: SharedText | undefined;
  for (let i = 0; i < results.length; i++) {
    const item = results[i]!;
    if ('error' in item) {
      parts[i] = JSON.stringify(item);
      continue;
    }
    if (shared === undefined || !shares(shared, item)) shared = sharedTextOf(item);
    let json = `${shared.head}${item.used},"remaining":${item.remaining},"allowed":${item.allowed}${shared.tail}`;
    if (item.overage !== undefined) json += `,"overage":${item.overage}`;
    parts[i] = `${json},"credits":${item.credits.length === 0 ? '[]' : JSON.stringify(item.credits)}}`;
  }
  return `{"results":[${parts.join(',')}]}`;
}
