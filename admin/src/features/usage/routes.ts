import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { commonErrorResponses } from '@ent/contract/common';
import {
  DEFAULT_HISTORY_MONTHS,
  UsageHistoryQuery,
  UsageHistorySchema,
  UsageRecordSchema,
} from '@ent/contract/usage';
import { usageHistory, usageOf } from './service.ts';

const tags = ['usage'];

export async function usageRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/org/usage/current',
    {
      config: { scope: 'subscribers:read' },
      schema: { tags, response: { 200: UsageRecordSchema, ...commonErrorResponses } },
    },
    async (request) => usageOf(app, request.principal!.organizationId, app.clock.now()),
  );

  // Beyond SPEC.md (docs/decisions.md, "Usage history"): past months and the daily series, from usage_days.
  app.get(
    '/org/usage/history',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        tags,
        querystring: UsageHistoryQuery,
        response: { 200: UsageHistorySchema, ...commonErrorResponses },
      },
    },
    async (request) =>
      usageHistory(
        app,
        request.principal!.organizationId,
        request.query.months ?? DEFAULT_HISTORY_MONTHS,
        app.clock.now(),
      ),
  );
}
