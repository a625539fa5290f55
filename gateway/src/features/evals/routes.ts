import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { notFound, validationError } from '@ent/common/errors/app-error';
import { EVERY_FEATURE, type SubscriberEntry } from '../shared/entries.ts';
import { ETAG_KEY, etagOfParts, strongEtag } from '../shared/etag.ts';
import {
  CheckBody,
  CheckResultSchema,
  type CheckResult,
  EntitlementListSchema,
  EntitlementsQuery,
  EvalParams,
} from '@ent/contract/evals';
import type { Answer, MeteredRequest } from '../shared/answer.ts';
import { idempotencyKeyOf } from '../shared/idempotency-key.ts';
import { xApiKeyOf } from '../shared/api-key-header.ts';
import { createMeteredResultWriter } from '../shared/metered-result-json.ts';

const toJson = (result: CheckResult): string => JSON.stringify(result);

const consumeNotMetered = (feature: string) =>
  validationError(`"consume" applies to metered features only; "${feature}" is not metered.`, {
    field: 'consume',
    value: feature,
  });

/** The two eval routes, on the shared hot path (evaluator.ts); plain handlers returning its promise. */
export async function evalRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { evaluator } = app;
  const authenticate = evaluator.authentication(xApiKeyOf);
  const meteredJson = createMeteredResultWriter();

  app.post(
    '/org/subscribers/:subscriber_id/entitlements/check',
    {
      config: { scope: 'check', evaluation: true },
      onRequest: authenticate,
      // Answers are sent pre-serialized (a JSON string is not serialized again); the schema is their contract.
      schema: { params: EvalParams, body: CheckBody, response: { 200: CheckResultSchema } },
    },
    (request, reply) => {
      const { feature, consume } = request.body;
      const metered: MeteredRequest = {
        feature,
        consume,
        idempotencyKey: consume === undefined ? '' : idempotencyKeyOf(request),
        render: (_entry, answers) => meteredJson(answers.get(feature)!),
      };
      return evaluator.evaluate(
        request,
        reply,
        request.params.subscriber_id,
        (entry) => {
          const json = entry.serializedResult(feature, feature, toJson);
          if (json === undefined) {
            throw notFound(`No feature with key "${feature}".`, { field: 'feature', value: feature });
          }
          if (consume !== undefined) throw consumeNotMetered(feature);
          return json;
        },
        { metered },
      );
    },
  );

  app.get(
    '/org/subscribers/:subscriber_id/entitlements',
    {
      // Every 2xx here is a metered eval: a HEAD (Fastify adds one to each GET) would spend the allotment unasked.
      exposeHeadRoute: false,
      config: { scope: 'check' },
      onRequest: authenticate,
      schema: {
        params: EvalParams,
        querystring: EntitlementsQuery,
        response: { 200: EntitlementListSchema },
      },
    },
    (request, reply) => {
      const subscriberId = request.params.subscriber_id;
      const all = request.query.all === true;
      const cacheKey = all ? '\u0000all' : '\u0000granted';
      // The list itself is shared by the subscribers of a plan set; the body around it names the subscriber.
      const prefix = `{"subscriber_id":${JSON.stringify(subscriberId)},"entitlements":`;
      const answer: Answer = (entry) => {
        const listed = entry.serialized(cacheKey, EVERY_FEATURE, () => {
          const results = entry.results();
          return JSON.stringify(all ? results : results.filter((result) => result.source !== 'none'));
        });
        return `${prefix}${listed}}`;
      };
      // Metered features carry the subscriber's use: such a list is made for this request alone.
      const metered: MeteredRequest = {
        feature: null,
        idempotencyKey: '',
        render: (entry, answers) => {
          const results = entry.results().map((result) => answers.get(result.feature) ?? result);
          return `${prefix}${JSON.stringify(all ? results : results.filter((result) => result.source !== 'none'))}}`;
        },
      };
      // The list's hash is made once per plan set; per request only the subscriber id and that hash are hashed.
      const etag = (entry: SubscriberEntry, body: string) => {
        const listed = body.slice(prefix.length, -1);
        if (entry.catalog.meteredFeatures.length > 0) return etagOfParts(subscriberId, strongEtag(listed));
        return etagOfParts(
          subscriberId,
          entry.serialized(cacheKey + ETAG_KEY, EVERY_FEATURE, () => strongEtag(listed)),
        );
      };
      return evaluator.evaluate(request, reply, subscriberId, answer, { etag, metered });
    },
  );
}
