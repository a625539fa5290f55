import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sendError, toAppError } from '@ent/common/http/error-handler';
import type { CheckResult } from '@ent/common/resolve/resolve';
import {
  OfrepBulkSuccess,
  OfrepParams,
  OfrepRequest,
  OfrepSuccess,
  type OfrepFailure,
} from '@ent/contract/ofrep';
import { EVERY_FEATURE, type SubscriberEntry } from '../shared/entries.ts';
import { ETAG_KEY, strongEtag } from '../shared/etag.ts';
import type { Answer, MeteredRequest } from '../shared/answer.ts';

/** An OFREP error answered with the protocol's own body (`{key?, errorCode, errorDetails}`). */
class OfrepError extends Error {
  constructor(
    readonly status: number,
    readonly body: OfrepFailure,
  ) {
    super(body.errorDetails ?? body.errorCode);
  }
}

const JSON_TYPE = 'application/json; charset=utf-8';
const OFREP_SINGLE_PREFIX = '/ofrep/v1/evaluate/flags/';
const SINGLE_PATH = `${OFREP_SINGLE_PREFIX}:key`;
const BULK_PATH = '/ofrep/v1/evaluate/flags';
const BULK_CACHE_KEY = '\u0000ofrep-bulk';
const MAX_SUBSCRIBER_ID = 255;
/** Longer keys are not echoed back in an error body. */
const MAX_ECHOED_KEY = 255;

/**
 * docs/decisions.md "ETags and OpenFeature": a flag is `allowed`, a limit its integer, unlimited the largest safe one.
 * A metered feature (DESIGN.md §5) is the integer that remains of its limit this period, with `{used, limit,
 * resets_at}` as metadata (a null left out: OFREP's metadata holds no nulls), and `credits_remaining` (what its live
 * credits have left, already counted in the value) while it holds any.
 */
const creditsRemaining = (credits: readonly { remaining: number }[]) =>
  credits.reduce((sum, credit) => sum + credit.remaining, 0);

export function toOfrep(result: CheckResult): OfrepSuccess {
  const reason = result.source === 'override' ? 'TARGETING_MATCH' : 'STATIC';
  if (result.kind === 'metered') {
    return {
      key: result.feature,
      value: result.remaining ?? Number.MAX_SAFE_INTEGER,
      reason,
      variant: result.source,
      metadata: {
        source: result.source,
        kind: 'metered',
        unlimited: result.limit === null,
        used: result.used,
        ...(result.limit === null ? {} : { limit: result.limit }),
        ...(result.resets_at === null ? {} : { resets_at: result.resets_at }),
        ...(result.credits.length === 0 ? {} : { credits_remaining: creditsRemaining(result.credits) }),
      },
    };
  }
  if (result.kind === 'flag') {
    return {
      key: result.feature,
      value: result.allowed,
      reason,
      variant: result.source,
      metadata: { source: result.source, kind: 'flag' },
    };
  }
  const unlimited = result.limit === null;
  return {
    key: result.feature,
    value: result.limit ?? Number.MAX_SAFE_INTEGER,
    reason,
    variant: result.source,
    metadata: { source: result.source, kind: 'limit', unlimited },
  };
}

const toOfrepJson = (result: CheckResult): string => JSON.stringify(toOfrep(result));

/** OFREP's 404 body for a key the catalog lacks; a key too long to echo is left out. */
const flagNotFound = (key: string | null): OfrepFailure =>
  key === null
    ? { errorCode: 'FLAG_NOT_FOUND', errorDetails: 'No feature has a key that long.' }
    : { key, errorCode: 'FLAG_NOT_FOUND', errorDetails: `No feature with key "${key}".` };

/** X-API-Key, else `Authorization: Bearer <key>` (the OFREP providers' `headers` option sends either). */
function apiKeyOf(request: FastifyRequest): string | undefined {
  const header = request.headers['x-api-key'];
  const key = Array.isArray(header) ? header[0] : header;
  if (key !== undefined) return key;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
  return match?.[1];
}

/** An answer with OFREP's own body. */
const sendOfrep = (reply: FastifyReply, status: number, body: OfrepFailure): FastifyReply =>
  reply.code(status).type(JSON_TYPE).send(JSON.stringify(body));

/**
 * OFREP's statuses: 401, 403 and 429 without a body (429 keeps Retry-After), a malformed request 400
 * PARSE_ERROR; a blocked organization (409) and 5xx keep SPEC.md's error body, which OFREP leaves open.
 */
function ofrepErrorHandler(
  this: FastifyInstance,
  error: FastifyError | Error,
  request: FastifyRequest,
  reply: FastifyReply,
) {
  const key = (request.params as { key?: string } | undefined)?.key;
  if (error instanceof OfrepError) return sendOfrep(reply, error.status, error.body);
  const appError = toAppError(error);
  if (appError.status === 401 || appError.status === 403 || appError.status === 429) {
    return reply.code(appError.status).headers(appError.headers).send();
  }
  // A key no feature can have (empty, or longer than any key): the flag does not exist, as for any unknown key.
  if ((error as FastifyError).validationContext === 'params') {
    return sendOfrep(reply, 404, flagNotFound(key ?? ''));
  }
  if (appError.status === 422) {
    const body: OfrepFailure = {
      ...(key === undefined ? {} : { key }),
      errorCode: 'PARSE_ERROR',
      errorDetails: appError.message,
    };
    return sendOfrep(reply, 400, body);
  }
  if (appError.status >= 500) request.log.error({ err: error }, 'request failed');
  return sendError(request, reply, appError);
}

const EXPOSED = 'ETag, Retry-After, X-Request-Id, X-Svc-Eval-Limit, X-Svc-Eval-Used, X-Svc-Eval-Warn';
const ALLOWED_HEADERS = 'Content-Type, Authorization, X-API-Key, If-None-Match';

/** The two OFREP routes, on the same hot path and metering as the eval routes (each request is one eval). */
export async function ofrepRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { evaluator, config } = app;
  const anyOrigin = config.ofrepCorsOrigins.includes('*');
  const origins = new Set(config.ofrepCorsOrigins);
  const allowedOrigin = (request: FastifyRequest): string | null => {
    const origin = request.headers.origin;
    return origin !== undefined && (anyOrigin || origins.has(origin)) ? origin : null;
  };

  const cors = async (request: FastifyRequest, reply: FastifyReply) => {
    if (config.ofrepCorsOrigins.length === 0) return;
    reply.header('vary', 'Origin');
    const origin = allowedOrigin(request);
    if (origin === null) return;
    reply.header('access-control-allow-origin', origin);
    reply.header('access-control-expose-headers', EXPOSED);
  };
  const authenticate = evaluator.authentication(apiKeyOf);

  /** The subscriber id, or the protocol's 400 before any eval is counted. */
  const targetingKeyOf = (body: OfrepRequest, key: string | undefined): string => {
    const keyed = key === undefined ? {} : { key };
    const targetingKey = body.context?.targetingKey;
    if (targetingKey === undefined || targetingKey === '') {
      throw new OfrepError(400, {
        ...keyed,
        errorCode: 'TARGETING_KEY_MISSING',
        errorDetails: 'context.targetingKey (the subscriber id) is required.',
      });
    }
    if (targetingKey.length > MAX_SUBSCRIBER_ID) {
      throw new OfrepError(400, {
        ...keyed,
        errorCode: 'INVALID_CONTEXT',
        errorDetails: `No subscriber "${targetingKey}".`,
      });
    }
    return targetingKey;
  };
  const unknownSubscriber = (key: string | undefined) => (subscriberId: string) =>
    new OfrepError(400, {
      ...(key === undefined ? {} : { key }),
      errorCode: 'INVALID_CONTEXT',
      errorDetails: `No subscriber "${subscriberId}".`,
    });

  const preflight = async (request: FastifyRequest, reply: FastifyReply) => {
    if (allowedOrigin(request) !== null) {
      reply.header('access-control-allow-methods', 'POST, OPTIONS');
      reply.header('access-control-allow-headers', ALLOWED_HEADERS);
      reply.header('access-control-max-age', '600');
    }
    return reply.code(204).send();
  };
  app.options(SINGLE_PATH, { onRequest: cors }, preflight);
  app.options(BULK_PATH, { onRequest: cors }, preflight);

  app.post(
    SINGLE_PATH,
    {
      config: { evaluation: true },
      onRequest: [cors, authenticate],
      errorHandler: ofrepErrorHandler,
      schema: { params: OfrepParams, body: OfrepRequest, response: { 200: OfrepSuccess } },
    },
    (request, reply) => {
      const { key } = request.params;
      const subscriberId = targetingKeyOf(request.body, key);
      const cacheKey = `\u0000ofrep\u0000${key}`;
      const answer: Answer = (entry) => {
        const json = entry.serializedResult(cacheKey, key, toOfrepJson);
        if (json === undefined) throw new OfrepError(404, flagNotFound(key));
        return json;
      };
      // A metered feature carries the subscriber's use now: its answer is made for this request alone.
      const metered: MeteredRequest = {
        feature: key,
        idempotencyKey: '',
        render: (_entry, answers) => toOfrepJson(answers.get(key)!),
      };
      return evaluator.evaluate(request, reply, subscriberId, answer, {
        unknownSubscriber: unknownSubscriber(key),
        metered,
      });
    },
  );

  // A key the flag route cannot take (over the router's length limit, or with a slash) would otherwise fall
  // through to the forward to admin and its 404: it is a flag that does not exist, with OFREP's body.
  app.post(
    `${OFREP_SINGLE_PREFIX}*`,
    { onRequest: [cors, authenticate], errorHandler: ofrepErrorHandler },
    (request) => {
      const key = (request.params as { '*': string })['*'];
      throw new OfrepError(404, flagNotFound(key.length > MAX_ECHOED_KEY ? null : key));
    },
  );

  app.post(
    BULK_PATH,
    {
      config: { evaluation: true },
      onRequest: [cors, authenticate],
      errorHandler: ofrepErrorHandler,
      schema: { body: OfrepRequest, response: { 200: OfrepBulkSuccess } },
    },
    (request, reply) => {
      const subscriberId = targetingKeyOf(request.body, undefined);
      const answer: Answer = (entry) =>
        entry.serialized(BULK_CACHE_KEY, EVERY_FEATURE, () =>
          JSON.stringify({ flags: entry.results().map(toOfrep) }),
        );
      const metered: MeteredRequest = {
        feature: null,
        idempotencyKey: '',
        render: (entry, answers) =>
          JSON.stringify({
            flags: entry.results().map((result) => toOfrep(answers.get(result.feature) ?? result)),
          }),
      };
      return evaluator.evaluate(request, reply, subscriberId, answer, {
        // With metered features the body carries this subscriber's use now: its ETag is the body's own.
        etag: (entry: SubscriberEntry, body: string) =>
          entry.catalog.meteredFeatures.length > 0
            ? strongEtag(body)
            : entry.serialized(BULK_CACHE_KEY + ETAG_KEY, EVERY_FEATURE, () => strongEtag(body)),
        unknownSubscriber: unknownSubscriber(undefined),
        metered,
      });
    },
  );
}
