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
import { correctUsage, listUsagePeriods } from './usage-service.ts';

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
    async (request) => {
      const { subscriber_id, feature } = request.params;
      return correctUsage(
        app,
        (work) => app.writePipeline.run(request, work),
        request.log,
        request.principal!.organizationId,
        subscriber_id,
        feature,
        request.body.used,
      );
    },
  );
}
