import { randomUUID } from 'node:crypto';
import type { paths } from './generated/api.ts';
import { EntitlementsError, isOutage, type ErrorBody } from './errors.ts';
import { holdsArray, isCheckResult, type Transport } from './transport.ts';

type ReportPath = paths['/org/subscribers/{subscriber_id}/usage']['post'];

/** A metered feature's answer as the service sends it: limit, used, remaining, the period (DESIGN.md §5). */
export type MeteredResult = ReportPath['responses'][200]['content']['application/json'];
/** Usage that already happened: add `delta` (not 0; negative takes away), or `set` used to a figure. */
export type UsageAmount = { delta: number; set?: never } | { set: number; delta?: never };
/** One event of a batch, with the route's own field names. Without `idempotency_key` the SDK makes one. */
export type UsageEventInput = {
  subscriber_id: string;
  feature: string;
  idempotency_key?: string;
} & UsageAmount;
/** One event as it was sent: with the idempotency key the SDK made for it when it had none. */
export type SentUsageEvent = UsageEventInput & { idempotency_key: string };

export interface ReportAnswer extends MeteredResult {
  /** The key the report was sent with (generated unless you passed one). */
  idempotencyKey: string;
  /** true when the service had applied this key before and answered its first answer again. */
  replayed: boolean;
}

export interface UsageBatchAnswer {
  /** In the events' order: a check result, or the error body of an event that was not applied. */
  results: (MeteredResult | ErrorBody)[];
  /** The events as sent, each with its idempotency key: resend the failed ones as they are, and none is applied twice. */
  events: SentUsageEvent[];
}

/** Most events the service takes in one batch (contract/src/metered-usage.ts, `MAX_USAGE_EVENTS`). */
export const USAGE_BATCH_SIZE = 1000;

/** `POST /org/subscribers/{id}/usage`; its one idempotency key is sent on every retry of the call. */
export async function reportUsage(
  transport: Transport,
  subscriberId: string,
  feature: string,
  amount: UsageAmount,
  idempotencyKey: string = randomUUID(),
): Promise<ReportAnswer> {
  const reply = await transport.send('POST', `/org/subscribers/${encodeURIComponent(subscriberId)}/usage`, {
    body: { feature, ...amount },
    idempotencyKey,
    answers: isCheckResult,
  });
  return { ...(reply.body as MeteredResult), idempotencyKey, replayed: reply.replayed };
}

/**
 * `POST /org/usage-events` in chunks of at most 1,000 events, one after another, every event with an idempotency
 * key (made here when missing) that the chunk's retries resend. A chunk the service could not take after the retries
 * (no answer, 5xx, 408, 429), or refused whole after an earlier chunk was taken, answers each of its events, and every
 * later one, with that failure's error body, so the caller can resend exactly those events; a mistake in the request
 * (401, 403, 422 for the whole body) in the first chunk is thrown.
 */
export async function reportUsageEvents(
  transport: Transport,
  events: readonly UsageEventInput[],
): Promise<UsageBatchAnswer> {
  const sent: SentUsageEvent[] = events.map((event) => ({
    ...event,
    idempotency_key: event.idempotency_key ?? randomUUID(),
  }));
  const results: UsageBatchAnswer['results'] = [];
  for (let start = 0; start < sent.length; start += USAGE_BATCH_SIZE) {
    const chunk = sent.slice(start, start + USAGE_BATCH_SIZE);
    try {
      const reply = await transport.send('POST', '/org/usage-events', {
        body: { events: chunk },
        answers: holdsArray('results'),
      });
      results.push(...(reply.body as { results: UsageBatchAnswer['results'] }).results);
    } catch (error) {
      // A mistake in the request (401, 403, 422) before anything was sent is thrown; after earlier batches were
      // applied it is answered like an outage, so their results and keys are not lost with it.
      if (!isOutage(error) && (start === 0 || !(error instanceof EntitlementsError))) throw error;
      const body = errorBodyOf(error as EntitlementsError, start);
      while (results.length < sent.length) results.push(body);
      break;
    }
  }
  return { results, events: sent };
}

/** `events.<i>` of the chunk that began at `start`, as the place in the caller's whole list. */
const inWholeList = (text: string, start: number) =>
  text.replace(/\bevents\.(\d+)/g, (_, index: string) => `events.${Number(index) + start}`);

function errorBodyOf(error: EntitlementsError, start: number): ErrorBody {
  const field = error.details.field;
  return {
    error: {
      type: error.type ?? 'api_error',
      code: error.code,
      message: inWholeList(error.message, start),
      ...(error.requestId === null ? {} : { request_id: error.requestId }),
      details:
        typeof field === 'string' ? { ...error.details, field: inWholeList(field, start) } : error.details,
    },
  };
}
