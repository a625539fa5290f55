import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import {
  ListOverridesQuery,
  OverrideListSchema,
  OverrideParams,
  OverrideSchema,
  OverridesParams,
  PutOverrideBody,
} from '@ent/contract/overrides';
import {
  deleteOverride,
  getOverride,
  listSubscriberOverrides,
  toOverrideBody,
  upsertOverride,
} from './service.ts';

const tags = ['overrides'];
const base = '/org/subscribers/:subscriber_id/overrides';

export async function overrideRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.put(
    `${base}/:feature_key`,
    {
      config: { scope: 'subscribers:write', auditService: 'api' },
      schema: {
        tags,
        params: OverrideParams,
        body: PutOverrideBody,
        response: { 200: OverrideSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      const { subscriber_id, feature_key } = request.params;
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          upsertOverride(
            trx,
            outcome,
            request.principal!.organizationId,
            subscriber_id,
            feature_key,
            request.body,
          ),
        (override) => ({ status: 200, body: toOverrideBody(override) }),
      );
    },
  );

  app.get(
    base,
    {
      config: { scope: 'subscribers:read' },
      schema: {
        tags,
        params: OverridesParams,
        querystring: ListOverridesQuery,
        response: { 200: OverrideListSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const page = await listSubscriberOverrides(
        app.db,
        request.principal!.organizationId,
        request.params.subscriber_id,
        {
          limit: request.query.limit,
          startingAfter: request.query.starting_after,
          liveAt: request.query.include_expired ? undefined : new Date(app.clock.now()),
        },
      );
      return { overrides: page.items.map(toOverrideBody), has_more: page.hasMore };
    },
  );

  app.get(
    `${base}/:feature_key`,
    {
      config: { scope: 'subscribers:read' },
      schema: {
        tags,
        params: OverrideParams,
        response: { 200: OverrideSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const { subscriber_id, feature_key } = request.params;
      return toOverrideBody(
        await getOverride(app.db, request.principal!.organizationId, subscriber_id, feature_key),
      );
    },
  );

  app.delete(
    `${base}/:feature_key`,
    {
      config: { scope: 'subscribers:write', auditService: 'api' },
      schema: {
        tags,
        params: OverrideParams,
        response: {
          204: Type.Null({ description: 'deleted, or there was none' }),
          404: ErrorBodySchema,
          ...commonErrorResponses,
        },
      },
    },
    async (request, reply) => {
      const { subscriber_id, feature_key } = request.params;
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          deleteOverride(trx, outcome, request.principal!.organizationId, subscriber_id, feature_key),
        () => ({ status: 204 }),
      );
    },
  );
}
