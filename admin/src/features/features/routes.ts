import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import {
  CreateFeatureBody,
  FeatureKeyParams,
  FeatureListSchema,
  FeatureSchema,
  ListFeaturesQuery,
  UpdateFeatureBody,
} from '@ent/contract/features';
import { createFeature, getFeature, listFeatures, toFeatureBody, updateFeature } from './service.ts';

const tags = ['features'];

export async function featureRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.post(
    '/org/features',
    {
      config: { scope: 'catalog:write', auditService: 'api' },
      schema: {
        tags,
        body: CreateFeatureBody,
        response: { 201: FeatureSchema, 409: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          createFeature(
            trx,
            outcome,
            request.principal!.organizationId,
            request.body,
            app.config.catalogLimits,
          ),
        (feature) => ({ status: 201, body: toFeatureBody(feature) }),
      );
    },
  );

  app.patch(
    '/org/features/:key',
    {
      config: { scope: 'catalog:write', auditService: 'api' },
      schema: {
        tags,
        params: FeatureKeyParams,
        body: UpdateFeatureBody,
        response: { 200: FeatureSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) =>
      app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          updateFeature(trx, outcome, request.principal!.organizationId, request.params.key, request.body),
        (feature) => ({ status: 200, body: toFeatureBody(feature) }),
      ),
  );

  app.get(
    '/org/features',
    {
      config: { scope: 'catalog:read' },
      schema: {
        tags,
        querystring: ListFeaturesQuery,
        response: { 200: FeatureListSchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const page = await listFeatures(app.db, request.principal!.organizationId, {
        limit: request.query.limit,
        startingAfter: request.query.starting_after,
        kind: request.query.kind,
      });
      return { features: page.items.map(toFeatureBody), has_more: page.hasMore };
    },
  );

  app.get(
    '/org/features/:key',
    {
      config: { scope: 'catalog:read' },
      schema: {
        tags,
        params: FeatureKeyParams,
        response: { 200: FeatureSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) =>
      toFeatureBody(await getFeature(app.db, request.principal!.organizationId, request.params.key)),
  );
}
