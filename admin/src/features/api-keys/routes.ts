import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  ApiKeyListSchema,
  ApiKeyParams,
  CreateApiKeyBody,
  CreatedApiKeySchema,
  ListApiKeysQuery,
} from '@ent/contract/api-keys';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import { ServiceAccountIdParams } from '@ent/contract/service-accounts';
import { createApiKey, listApiKeys, revokeApiKey, toApiKeyBody } from './service.ts';

const tags = ['api keys'];

export async function apiKeyRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.post(
    '/org/service-accounts/:service_account_id/api-keys',
    {
      config: { scope: 'org:write', auditService: 'identity' },
      // Every field is optional: a POST without a body creates a key with the defaults.
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        tags,
        params: ServiceAccountIdParams,
        body: CreateApiKeyBody,
        response: {
          201: CreatedApiKeySchema,
          404: ErrorBodySchema,
          409: ErrorBodySchema,
          ...commonErrorResponses,
        },
      },
    },
    async (request, reply) => {
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          createApiKey(trx, outcome, request.principal!, request.params.service_account_id, request.body),
        ({ key, plaintext }) => ({ status: 201, body: { ...toApiKeyBody(key), api_key: plaintext } }),
      );
    },
  );

  app.get(
    '/org/service-accounts/:service_account_id/api-keys',
    {
      config: { scope: 'org:read' },
      schema: {
        tags,
        params: ServiceAccountIdParams,
        querystring: ListApiKeysQuery,
        response: { 200: ApiKeyListSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const organizationId = request.principal!.organizationId;
      const page = await listApiKeys(app.db, organizationId, request.params.service_account_id, {
        limit: request.query.limit,
        startingAfter: request.query.starting_after,
      });
      return { api_keys: page.items.map(toApiKeyBody), has_more: page.hasMore };
    },
  );

  app.delete(
    '/org/service-accounts/:service_account_id/api-keys/:key_id',
    {
      config: { scope: 'org:write', auditService: 'identity' },
      schema: {
        tags,
        params: ApiKeyParams,
        response: { 204: { type: 'null' }, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          revokeApiKey(
            trx,
            outcome,
            request.principal!,
            request.params.service_account_id,
            request.params.key_id,
            new Date(app.clock.now()),
          ),
        () => ({ status: 204 }),
      );
    },
  );
}
