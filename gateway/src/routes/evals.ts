import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { notFound } from '@ent/common/errors/app-error';
import { listedEntitlements } from '@ent/common/resolve/resolve';
import { CheckBody, EntitlementsQuery, EvalParams } from '@ent/common/schemas/evals';
import type { Answer } from './evaluator.ts';

/** The two eval routes, on the shared hot path (evaluator.ts). */
export async function evalRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { evaluator } = app;
  const authenticate = async (request: FastifyRequest) => {
    const header = request.headers['x-api-key'];
    await evaluator.authenticate(request, Array.isArray(header) ? header[0] : header);
  };

  app.post(
    '/org/subscribers/:subscriber_id/entitlements/check',
    { config: { scope: 'check' }, onRequest: authenticate, schema: { params: EvalParams, body: CheckBody } },
    async (request, reply) => {
      const { feature } = request.body;
      return evaluator.evaluate(request, reply, request.params.subscriber_id, (entry) => {
        let json = entry.json.get(feature);
        if (json === undefined) {
          const result = entry.resolved.byFeature.get(feature);
          if (!result) throw notFound(`No feature with key "${feature}".`, { field: 'feature', value: feature });
          json = JSON.stringify(result);
          entry.json.set(feature, json);
        }
        return json;
      });
    },
  );

  app.get(
    '/org/subscribers/:subscriber_id/entitlements',
    { config: { scope: 'check' }, onRequest: authenticate, schema: { params: EvalParams, querystring: EntitlementsQuery } },
    async (request, reply) => {
      const subscriberId = request.params.subscriber_id;
      const all = request.query.all === true;
      const cacheKey = all ? '\u0000all' : '\u0000granted';
      const answer: Answer = (entry) => {
        let json = entry.json.get(cacheKey);
        if (json === undefined) {
          json = JSON.stringify({ subscriber_id: subscriberId, entitlements: listedEntitlements(entry.resolved, all) });
          entry.json.set(cacheKey, json);
        }
        return json;
      };
      return evaluator.evaluate(request, reply, subscriberId, answer, { etagKey: cacheKey });
    },
  );
}
