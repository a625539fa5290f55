import type { FastifyReply, FastifyRequest } from 'fastify';
import { uncountedUsage, type EvalUsageHeaders } from '@ent/common/metering/usage';
import { ifNoneMatchMatches } from './etag.ts';
import type { SubscriberEntry } from './entries.ts';
import type { MeteredCheckResult } from '@ent/contract/evals';

/** What an eval answers once its entitlements are known: a serialized body, or an error to throw. */
export type Answer = (entry: SubscriberEntry) => string;

export interface EvaluateOptions {
  /**
   * The answer's strong ETag (a SHA-256 over its content: etag.ts); a matching If-None-Match gets a 304, which
   * is not a 2xx and so not an eval (SPEC.md counts 2xx): it is refunded like any other non-2xx.
   */
  etag?: (entry: SubscriberEntry, body: string) => string;
  /** The error for a subscriber that does not exist (default: 404 NOT_FOUND). */
  unknownSubscriber?: (subscriberId: string) => Error;
  /** Metered features in the answer: read (and consumed) within the gate call (DESIGN.md §5). */
  metered?: MeteredRequest;
}

export interface MeteredRequest {
  /** The feature asked about (the check route), or null: every metered feature (the list). */
  feature: string | null;
  /** Deduct this much (check route only). */
  consume?: number | undefined;
  /** The `Idempotency-Key` of a consume ('' = none). */
  idempotencyKey: string;
  /** The body, given the entry and the metered features' answers by key; used when the answer holds any. */
  render(entry: SubscriberEntry, answers: MeteredAnswersByFeature): string;
}

/** The metered features' answers of one request, by feature key. */
export type MeteredAnswersByFeature = Pick<ReadonlyMap<string, MeteredCheckResult>, 'get'>;

/**
 * The answers of a request that holds one metered feature (a check, a flag): one small object where a Map and its
 * table were made per consume.
 */
export class OneMeteredAnswer implements MeteredAnswersByFeature {
  constructor(
    private readonly feature: string,
    private readonly result: MeteredCheckResult,
  ) {}

  get(feature: string): MeteredCheckResult | undefined {
    return feature === this.feature ? this.result : undefined;
  }
}

const JSON_TYPE = 'application/json; charset=utf-8';

export function setUsageHeaders(reply: FastifyReply, usage: EvalUsageHeaders | null): void {
  if (!usage) return;
  reply.header('x-svc-eval-limit', usage.limit);
  reply.header('x-svc-eval-used', usage.used);
  if (usage.warn) reply.header('x-svc-eval-warn', usage.warn);
}

/**
 * Sends the answer with its usage headers, or a 304 when the client's If-None-Match already names it: a 304 is
 * refunded, so its headers count the month without it.
 */
export function send(
  request: FastifyRequest,
  reply: FastifyReply,
  entry: SubscriberEntry,
  body: string,
  options: EvaluateOptions | undefined,
  usage: EvalUsageHeaders | null,
): void {
  if (options?.etag) {
    const etag = options.etag(entry, body);
    reply.header('etag', etag);
    if (ifNoneMatchMatches(request.headers['if-none-match'], etag)) {
      setUsageHeaders(reply, usage && uncountedUsage(usage));
      reply.code(304).send();
      return;
    }
  }
  setUsageHeaders(reply, usage);
  reply.type(JSON_TYPE).send(body);
}

/** Whether the answer went out 2xx (a 304 did not: it is refunded). */
export const is2xx = (reply: FastifyReply) => reply.statusCode >= 200 && reply.statusCode < 300;
