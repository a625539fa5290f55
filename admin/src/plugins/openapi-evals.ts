import type { TSchema } from '@sinclair/typebox';
import { ErrorBodySchema } from '@ent/contract/common';
import {
  CheckBody,
  CheckResultSchema,
  EntitlementListSchema,
  EntitlementsQuery,
  EvalParams,
} from '@ent/contract/evals';
import {
  ReportUsageBody,
  SubscriberUsageSchema,
  UsageEventsBody,
  UsageEventsResultSchema,
} from '@ent/contract/metered-usage';
import { MeteredCheckResultSchema } from '@ent/contract/evals';
import { OfrepBulkSuccess, OfrepFailure, OfrepParams, OfrepRequest, OfrepSuccess } from '@ent/contract/ofrep';

/**
 * The two eval routes are answered by the gateway, not admin, so no admin route generates them; without this
 * the OpenAPI document at `{base_url}/openapi.json` (served by admin through the gateway) would lack the most
 * used routes of the API. Built from the same TypeBox schemas the gateway validates with.
 */
type OpenApiObject = { paths?: Record<string, Record<string, unknown>> } & Record<string, unknown>;

/** Plain JSON Schema: TypeBox's symbol-keyed metadata and the `$id` used for registration left out. */
const plain = (schema: TSchema): Record<string, unknown> => {
  const { $id: _id, ...rest } = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
  return rest;
};

const json = (schema: TSchema, description: string) => ({
  description,
  content: { 'application/json': { schema: plain(schema) } },
});

const evalHeaders = {
  'X-Svc-Eval-Limit': { description: 'evals included this month', schema: { type: 'integer' } },
  'X-Svc-Eval-Used': {
    description: 'evals counted so far this month (may lag by about a second)',
    schema: { type: 'integer' },
  },
  'X-Svc-Eval-Warn': {
    description: '80, 100 or grace; present only when warning',
    schema: { type: 'string', enum: ['80', '100', 'grace'] },
  },
};

const errors = {
  401: json(ErrorBodySchema, 'Missing, invalid or revoked API key'),
  403: json(ErrorBodySchema, 'The key lacks the check scope'),
  404: json(ErrorBodySchema, 'Unknown subscriber or feature'),
  409: {
    ...json(
      ErrorBodySchema,
      'The monthly eval allotment is exhausted and blocking applies (details: field evals, value YYYY-MM)',
    ),
    headers: evalHeaders,
  },
  422: json(ErrorBodySchema, 'Invalid body or query'),
  429: json(ErrorBodySchema, 'More than the burst limit on the eval routes (Retry-After)'),
  503: json(ErrorBodySchema, 'Entitlements cannot be loaded right now'),
};

const pathParameters = Object.entries(
  (EvalParams as unknown as { properties: Record<string, TSchema> }).properties,
).map(([name, schema]) => ({ in: 'path', name, required: true, schema: plain(schema) }));

const queryParameters = Object.entries(
  (EntitlementsQuery as unknown as { properties: Record<string, TSchema> }).properties,
).map(([name, schema]) => ({
  in: 'query',
  name,
  required: false,
  schema: plain(schema),
  description: schema.description,
}));

const etagHeader = {
  description: 'strong ETag of the body; send it back as If-None-Match',
  schema: { type: 'string' },
};
/** A list answered 304: the ETag, and the eval headers of the month (the 304 itself is not counted). */
const notModified = {
  description: 'If-None-Match matched the current ETag; not counted as an eval',
  headers: { ETag: etagHeader, ...evalHeaders },
};
const ifNoneMatch = { in: 'header', name: 'If-None-Match', required: false, schema: { type: 'string' } };

const idempotencyKeyHeader = {
  in: 'header',
  name: 'Idempotency-Key',
  required: false,
  schema: { type: 'string', minLength: 1, maxLength: 255 },
  description:
    'a consume or report applied once per organization within 24 h; a repeat answers the first result',
};
const replayedHeader = {
  'Idempotent-Replayed': {
    description: "'true' when the answer is an earlier request's",
    schema: { type: 'string' },
  },
};
const usageErrors = {
  401: errors[401],
  403: json(ErrorBodySchema, 'The key lacks the usage:write scope'),
  422: json(
    ErrorBodySchema,
    "Invalid body, not a metered feature, IDEMPOTENCY_KEY_REUSED, or more events than the organization's rate",
  ),
  429: json(ErrorBodySchema, "More than the organization's usage events per second (Retry-After)"),
  503: json(ErrorBodySchema, 'Usage cannot be applied right now (Retry-After); nothing was applied'),
};

/** DESIGN.md §5: metered usage, answered by the gateway (not evals). */
const METERED_USAGE_PATHS: Record<string, Record<string, unknown>> = {
  '/org/subscribers/{subscriber_id}/usage': {
    post: {
      tags: ['metered usage'],
      summary:
        'Report usage of a metered feature that already happened: delta or set (scope usage:write; not an eval)',
      parameters: [...pathParameters, idempotencyKeyHeader],
      requestBody: { required: true, content: { 'application/json': { schema: plain(ReportUsageBody) } } },
      responses: {
        200: { ...json(MeteredCheckResultSchema, 'The feature after the report'), headers: replayedHeader },
        404: json(ErrorBodySchema, 'Unknown subscriber or feature'),
        ...usageErrors,
      },
    },
    get: {
      tags: ['metered usage'],
      summary: "Every metered feature's current period (scope subscribers:read; not an eval)",
      parameters: pathParameters,
      responses: {
        200: json(SubscriberUsageSchema, 'The current periods, by feature key'),
        404: json(ErrorBodySchema, 'Unknown subscriber'),
        401: errors[401],
        403: json(ErrorBodySchema, 'The key lacks the subscribers:read scope'),
        503: usageErrors[503],
      },
    },
  },
  '/org/usage-events': {
    post: {
      tags: ['metered usage'],
      summary: 'Report up to 1,000 usage events at once (scope usage:write; not evals)',
      parameters: [
        {
          ...idempotencyKeyHeader,
          description:
            "keys each event without its own idempotency_key as '<key>#<index>': the batch sent again is " +
            'answered, not applied again (an event changed at that index: IDEMPOTENCY_KEY_REUSED in its result)',
        },
      ],
      requestBody: { required: true, content: { 'application/json': { schema: plain(UsageEventsBody) } } },
      responses: {
        200: {
          ...json(UsageEventsResultSchema, "Each event's check result or error body, in order"),
          headers: {
            'Idempotent-Replayed': {
              description: "'true' when every event's answer is an earlier request's",
              schema: { type: 'string' },
            },
          },
        },
        ...usageErrors,
      },
    },
  },
};

/** OFREP (open-feature/protocol service/openapi.yaml) as the gateway answers it; docs/decisions.md has the mapping. */
const ofrepErrors = {
  401: { description: 'Missing, invalid or revoked key (X-API-Key or Authorization: Bearer); no body' },
  403: { description: 'The key lacks the check scope; no body' },
  409: json(ErrorBodySchema, 'The monthly eval allotment is exhausted and blocking applies'),
  429: {
    description: 'More than the burst limit; no body',
    headers: { 'Retry-After': { schema: { type: 'integer' } } },
  },
  503: json(ErrorBodySchema, 'Entitlements cannot be loaded right now'),
};
// OFREP takes the key as X-API-Key or as `Authorization: Bearer` (DESIGN.md §3); the /org routes, X-API-Key only.
const ofrepSecurity = [{ apiKey: [] }, { bearer: [] }];
const OFREP_PATHS: Record<string, Record<string, unknown>> = {
  '/ofrep/v1/evaluate/flags/{key}': {
    post: {
      tags: ['ofrep'],
      summary: 'OpenFeature: evaluate one feature for context.targetingKey (scope check; one eval)',
      security: ofrepSecurity,
      parameters: Object.entries(
        (OfrepParams as unknown as { properties: Record<string, TSchema> }).properties,
      ).map(([name, schema]) => ({ in: 'path', name, required: true, schema: plain(schema) })),
      requestBody: { required: true, content: { 'application/json': { schema: plain(OfrepRequest) } } },
      responses: {
        200: { ...json(OfrepSuccess, 'The evaluation'), headers: evalHeaders },
        400: json(OfrepFailure, 'TARGETING_KEY_MISSING, INVALID_CONTEXT (unknown subscriber) or PARSE_ERROR'),
        404: json(OfrepFailure, 'FLAG_NOT_FOUND'),
        ...ofrepErrors,
      },
    },
  },
  '/ofrep/v1/evaluate/flags': {
    post: {
      tags: ['ofrep'],
      summary: 'OpenFeature: evaluate every catalog feature for context.targetingKey (scope check; one eval)',
      security: ofrepSecurity,
      parameters: [ifNoneMatch],
      requestBody: { required: true, content: { 'application/json': { schema: plain(OfrepRequest) } } },
      responses: {
        200: {
          ...json(OfrepBulkSuccess, 'Every catalog feature, ordered by key'),
          headers: { ...evalHeaders, ETag: etagHeader },
        },
        304: notModified,
        400: json(OfrepFailure, 'TARGETING_KEY_MISSING, INVALID_CONTEXT (unknown subscriber) or PARSE_ERROR'),
        ...ofrepErrors,
      },
    },
  },
};

const EVAL_PATHS: Record<string, Record<string, unknown>> = {
  '/org/subscribers/{subscriber_id}/entitlements/check': {
    post: {
      tags: ['evals'],
      summary: 'May the subscriber use this feature, and how much? (scope check; one eval)',
      description:
        'A metered feature answers its use in the current period. `consume` (metered features only) deducts n if ' +
        '`used + n <= limit` (or the limit is soft or unlimited) and answers `allowed: true`; otherwise `allowed: ' +
        'false` and nothing is deducted, both 200. A consume is never answered from a cache; without Redis it is 503 ' +
        '(nothing deducted: retry with the same Idempotency-Key).',
      parameters: [...pathParameters, idempotencyKeyHeader],
      requestBody: { required: true, content: { 'application/json': { schema: plain(CheckBody) } } },
      responses: {
        200: {
          ...json(CheckResultSchema, 'The check result'),
          headers: { ...evalHeaders, ...replayedHeader },
        },
        ...errors,
      },
    },
  },
  ...METERED_USAGE_PATHS,
  '/org/subscribers/{subscriber_id}/entitlements': {
    get: {
      tags: ['evals'],
      summary: "The subscriber's entitlements, ordered by feature key (scope check; one eval)",
      parameters: [...pathParameters, ...queryParameters],
      responses: {
        200: {
          ...json(EntitlementListSchema, 'The entitlements'),
          headers: { ...evalHeaders, ETag: etagHeader },
        },
        304: notModified,
        ...errors,
      },
    },
  },
  ...OFREP_PATHS,
};

/** swagger's `transformObject`: the generated document plus the gateway's eval routes. */
export function withEvalPaths({
  openapiObject,
}: {
  openapiObject: Partial<OpenApiObject>;
}): Partial<OpenApiObject> {
  return { ...openapiObject, paths: { ...EVAL_PATHS, ...(openapiObject.paths ?? {}) } };
}
