import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import { MeteredCheckResultSchema } from '@ent/contract/evals';
import {
  CorrectUsageBody,
  ListUsagePeriodsQuery,
  SubscriberFeatureUsageParams,
  UsagePeriodListSchema,
} from '@ent/contract/metered-usage';
import { correctUsage, listUsagePeriods, type RunWrite } from './usage-service.ts';

const tags = ['usage'];
const base = '/org/subscribers/:subscriber_id/usage/:feature';

/** DESIGN.md §5, "Reads and corrections": a metered feature's past periods, and corrections of the current one. */
export async function meteredUsageRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    `${base}/periods`,
    {
      config: { scope: 'subscribers:read' },
      schema: {
        tags,
        params: SubscriberFeatureUsageParams,
        querystring: ListUsagePeriodsQuery,
        response: { 200: UsagePeriodListSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const { subscriber_id, feature } = request.params;
      const page = await listUsagePeriods(app, request.principal!.organizationId, subscriber_id, feature, {
        limit: request.query.limit,
        startingAfter: request.query.starting_after,
      });
      return { periods: page.items, has_more: page.hasMore };
    },
  );

  app.put(
    base,
    {
      config: { scope: 'subscribers:write', auditService: 'api' },
      schema: {
        tags,
        params: SubscriberFeatureUsageParams,
        body: CorrectUsageBody,
        response: { 200: MeteredCheckResultSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      const { subscriber_id, feature } = request.params;
      // The correction's result is its answer: kept with the write, as every write's is.
      const answering: RunWrite = async (work) => {
        let result!: Awaited<ReturnType<typeof work>>;
        await app.writePipeline.answer(
          request,
          reply,
          async (trx, outcome) => (result = await work(trx, outcome)),
          (body) => ({ status: 200, body }),
        );
        return result;
      };
      await correctUsage(
        app,
        answering,
        request.log,
        request.principal!.organizationId,
        subscriber_id,
        feature,
        request.body.used,
      );
      return reply;
    },
  );
}
