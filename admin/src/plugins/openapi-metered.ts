import { ErrorBodySchema } from '@ent/contract/common';
import { MeteredCheckResultSchema } from '@ent/contract/evals';
import {
  ReportUsageBody,
  SubscriberUsageParams,
  SubscriberUsageSchema,
  UsageEventsBody,
  UsageEventsResultSchema,
} from '@ent/contract/metered-usage';
import { json, parametersOf, plain } from './openapi-json.ts';

/**
 * DESIGN.md §5: the metered usage routes the gateway answers itself (reports, batches, the current usage), documented
 * here because no admin route generates them. The consume is the check route's `consume` (openapi-evals.ts).
 */

/** The header a consume or a report may carry: applied once per organization within 24 h. */
export const idempotencyKeyHeader = {
  in: 'header',
  name: 'Idempotency-Key',
  required: false,
  schema: { type: 'string', minLength: 1, maxLength: 255 },
  description:
    'applied once per organization within 24 h; a repeat with the same request answers the first answer again ' +
    '(Idempotent-Replayed: true), another request under the same key is 422 IDEMPOTENCY_KEY_REUSED',
};

export const replayedHeader = {
  'Idempotent-Replayed': {
    description: '`true` when this is the first answer to an earlier request with the same Idempotency-Key',
    schema: { type: 'string', enum: ['true'] },
  },
};

const retryAfter = { 'Retry-After': { description: 'seconds', schema: { type: 'integer' } } };

/** Reports are not evals: their own rate, no eval headers, accepted while evals are stopped (DESIGN.md §5). */
const reportErrors = {
  401: json(ErrorBodySchema, 'Missing, invalid or revoked API key'),
  403: json(ErrorBodySchema, 'The key lacks the usage:write scope'),
  404: json(ErrorBodySchema, 'Unknown subscriber or feature'),
  422: json(
    ErrorBodySchema,
    'Invalid body (neither or both of delta and set, delta 0), a feature that is not metered, or ' +
      'IDEMPOTENCY_KEY_REUSED',
  ),
  429: {
    ...json(ErrorBodySchema, "More than the organization's usage events per second"),
    headers: retryAfter,
  },
  503: {
    ...json(
      ErrorBodySchema,
      'Usage cannot be applied right now (nothing was applied: retry with the same key)',
    ),
    headers: retryAfter,
  },
};

// A batch names no subscriber in its path: an unknown subscriber or feature is that event's own error body.
const { 404: _unknownSubscriber, ...batchErrors } = reportErrors;

export const METERED_PATHS: Record<string, Record<string, unknown>> = {
  '/org/subscribers/{subscriber_id}/usage': {
    post: {
      tags: ['usage'],
      summary: 'Report usage that already happened: add delta, or set used (scope usage:write; not an eval)',
      description:
        'Never refused for being over the limit; used never goes below 0. Exactly one of `delta` (not 0) and `set`.',
      parameters: [...parametersOf('path', SubscriberUsageParams), idempotencyKeyHeader],
      requestBody: { required: true, content: { 'application/json': { schema: plain(ReportUsageBody) } } },
      responses: {
        200: {
          ...json(MeteredCheckResultSchema, 'The check result after the report'),
          headers: replayedHeader,
        },
        ...reportErrors,
      },
    },
    get: {
      tags: ['usage'],
      summary: "Every metered feature's current period for the subscriber, by feature key",
      parameters: parametersOf('path', SubscriberUsageParams),
      responses: {
        200: json(SubscriberUsageSchema, 'The current period of each metered feature'),
        401: reportErrors[401],
        403: json(ErrorBodySchema, 'The key lacks the scope'),
        404: json(ErrorBodySchema, 'Unknown subscriber'),
        503: reportErrors[503],
      },
    },
  },
  '/org/usage-events': {
    post: {
      tags: ['usage'],
      summary: 'Report up to 1,000 usage events at once (scope usage:write; not an eval)',
      description:
        "Answered in the events' order, each a check result or the error body of an event that was not applied; " +
        "an event's `idempotency_key` is applied once per organization within 24 h.",
      requestBody: { required: true, content: { 'application/json': { schema: plain(UsageEventsBody) } } },
      responses: {
        200: json(UsageEventsResultSchema, 'One result per event, in order'),
        ...batchErrors,
      },
    },
  },
};
