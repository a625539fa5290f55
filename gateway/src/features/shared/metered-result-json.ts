import type { MeteredCheckResult } from '@ent/contract/evals';
import { ListedCredit } from '@ent/common/metering/credit-answer';

/**
 * A metered check result as JSON text, written exactly as `JSON.stringify` writes meteredResultIn's object (its fields
 * in the schema's order). The fields that the results of one feature's period share (feature, limit, period, source)
 * are written once and kept; each result adds its figures. `JSON.stringify` walks eleven fields and quotes five
 * strings per result: about four times the cost of this (measured per answer, 0.65 µs against 0.15 µs).
 */
export interface SharedResultText {
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

export function sharedResultTextOf(result: MeteredCheckResult): SharedResultText {
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

export const sharesResultText = (text: SharedResultText, result: MeteredCheckResult) =>
  text.feature === result.feature &&
  text.limit === result.limit &&
  text.periodStart === result.period_start &&
  text.resetsAt === result.resets_at &&
  text.source === result.source;

/** `result`'s text, its shared fields from `shared` (which must share them: sharesResultText). */
export function meteredResultJson(result: MeteredCheckResult, shared: SharedResultText): string {
  let json = `${shared.head}${result.used},"remaining":${result.remaining},"allowed":${result.allowed}${shared.tail}`;
  if (result.overage !== undefined) json += `,"overage":${result.overage}`;
  return `${json},"credits":${ListedCredit.listJsonText(result.credits)}}`;
}

/** Features whose shared text a writer keeps at once; a full writer starts over (the features in use come back). */
const MAX_KEPT_FEATURES = 1000;

/**
 * A writer of single results (a check's answer) that keeps each feature's shared text across requests: a consume
 * or a metered check answers the same feature and period over and over. A kept text is used only for a result that
 * shares its fields, so the text is always `JSON.stringify`'s.
 */
export function createMeteredResultWriter(max = MAX_KEPT_FEATURES): (result: MeteredCheckResult) => string {
  const kept = new Map<string, SharedResultText>();
  return (result) => {
    let shared = kept.get(result.feature);
    if (shared === undefined || !sharesResultText(shared, result)) {
      shared = sharedResultTextOf(result);
      if (kept.size >= max) kept.clear();
      kept.set(result.feature, shared);
    }
    return meteredResultJson(result, shared);
  };
}
