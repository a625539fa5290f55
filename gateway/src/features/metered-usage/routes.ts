import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { commonErrorResponses, ErrorBodySchema } from '@ent/contract/common';
import { MeteredCheckResultSchema } from '@ent/contract/evals';
import {
  ReportUsageBody,
  SubscriberUsageParams,
  SubscriberUsageSchema,
  UsageEventsBody,
  UsageEventsResultSchema,
  type UsageEvent,
  type UsageEventsResult,
} from '@ent/contract/metered-usage';
import { usageEventsJson } from './results-json.ts';
import { xApiKeyOf } from '../shared/api-key-header.ts';
import { idempotencyKeyOf } from '../shared/idempotency-key.ts';
import { applyMetered, unknownSubscriber } from '../shared/metered-answers.ts';
import { applyUsageEvents, currentEntries } from './usage-events.ts';
import { takeUsageEvents } from './usage-rate.ts';

const serializeUsageEvents = (payload: UsageEventsResult) => usageEventsJson(payload.results);

/**
 * A batch sent with an `Idempotency-Key` header (DESIGN.md §5: every POST under /org takes one; the SDK's API client
 * sends one with every write and retries under it): each event without its own `idempotency_key` is keyed
 * `<header>#<its index>`, so the batch sent again is answered, not applied again, event by event. An event the second
 * body changed at that index gets 422 `IDEMPOTENCY_KEY_REUSED`; one it added is applied.
 */
function eventsUnderBatchKey(events: readonly UsageEvent[], batchKey: string): readonly UsageEvent[] {
  if (batchKey === '') return events;
  return events.map((event, i) =>
    event.idempotency_key === undefined ? { ...event, idempotency_key: `${batchKey}#${i}` } : event,
  );
}

/**
 * Metered usage on the gateway (DESIGN.md §5): reports and batches of usage that already happened (scope
 * `usage:write`), and a subscriber's current periods (scope `subscribers:read`). None is an eval: no monthly count,
 * no burst; reports have their own rate per organization and are taken even while evals are blocked.
 */
export async function meteredUsageRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { evaluator, clock } = app;
  const authenticateWrite = evaluator.authentication(xApiKeyOf, 'usage:write');
  const authenticateRead = evaluator.authentication(xApiKeyOf, 'subscribers:read');

  app.post(
    '/org/subscribers/:subscriber_id/usage',
    {
      config: { scope: 'usage:write' },
      onRequest: authenticateWrite,
      schema: {
        params: SubscriberUsageParams,
        body: ReportUsageBody,
        response: {
          200: MeteredCheckResultSchema,
          404: ErrorBodySchema,
          429: ErrorBodySchema,
          ...commonErrorResponses,
        },
      },
    },
    async (request, reply) => {
      const organizationId = request.knownKey!.principal!.organizationId;
      const nowMs = clock.now();
      const idempotencyKey = idempotencyKeyOf(request);
      const taken = takeUsageEvents(app, organizationId, 1, nowMs);
      const [answer] = await applyUsageEvents(
        app,
        request,
        organizationId,
        [
          {
            subscriber_id: request.params.subscriber_id,
            ...request.body,
            idempotency_key: idempotencyKey || undefined,
          },
        ],
        nowMs,
        taken,
      );
      if ('error' in answer!) throw answer.error;
      if (answer!.replayed) reply.header('idempotent-replayed', 'true');
      return answer!.result;
    },
  );

  app.post(
    '/org/usage-events',
    {
      config: { scope: 'usage:write' },
      onRequest: authenticateWrite,
      schema: {
        body: UsageEventsBody,
        response: { 200: UsageEventsResultSchema, 429: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      const organizationId = request.knownKey!.principal!.organizationId;
      const nowMs = clock.now();
      const events = eventsUnderBatchKey(request.body.events, idempotencyKeyOf(request));
      const taken = takeUsageEvents(app, organizationId, events.length, nowMs);
      const answers = await applyUsageEvents(app, request, organizationId, events, nowMs, taken);
      if (answers.every((answer) => 'result' in answer && answer.replayed)) {
        reply.header('idempotent-replayed', 'true');
      }
      // The results are meteredResultIn's and toBody's objects, exactly the schema's fields: usageEventsJson writes
      // them as JSON.stringify and the schema's serializer would, whereas that one would try each branch of the union
      // (and the date-time formats within) on every one of up to 1,000 results to find which it is.
      reply.type('application/json; charset=utf-8').serializer(serializeUsageEvents);
      return {
        results: answers.map((answer) =>
          'error' in answer ? answer.error.toBody(request.id) : answer.result,
        ),
      };
    },
  );

  app.get(
    '/org/subscribers/:subscriber_id/usage',
    {
      exposeHeadRoute: false,
      config: { scope: 'subscribers:read' },
      onRequest: authenticateRead,
      schema: {
        params: SubscriberUsageParams,
        response: { 200: SubscriberUsageSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const organizationId = request.knownKey!.principal!.organizationId;
      const subscriberId = request.params.subscriber_id;
      const nowMs = clock.now();
      const entries = await currentEntries(
        app,
        request,
        organizationId,
        [subscriberId],
        nowMs,
        'subscribers:read',
      );
      const entry = entries.get(subscriberId)!;
      if (!entry.subscriber.exists) throw unknownSubscriber(subscriberId);
      const items = entry.catalog.meteredFeatures.map((feature) => ({
        subscriberId,
        entry,
        feature,
        kind: 'r' as const,
        amount: 0,
        idempotencyKey: '',
      }));
      const answers = await applyMetered(app, organizationId, items, nowMs);
      return {
        subscriber_id: subscriberId,
        usage: answers.map((answer) => {
          if ('error' in answer) throw answer.error;
          return answer.result;
        }),
      };
    },
  );
}
