import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import {
  CreateServiceAccountBody,
  ListServiceAccountsQuery,
  ServiceAccountIdParams,
  ServiceAccountListSchema,
  ServiceAccountSchema,
  UpdateServiceAccountBody,
} from '@ent/contract/service-accounts';
import {
  createServiceAccount,
  getServiceAccount,
  listServiceAccounts,
  toServiceAccountBody,
  updateServiceAccount,
} from './service.ts';

const tags = ['service accounts'];

export async function serviceAccountRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.post(
    '/org/service-accounts',
    {
      config: { scope: 'org:write', auditService: 'identity' },
      schema: {
        tags,
        body: CreateServiceAccountBody,
        response: { 201: ServiceAccountSchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) => createServiceAccount(trx, outcome, request.principal!, request.body),
        (account) => ({ status: 201, body: toServiceAccountBody(account) }),
      );
    },
  );

  app.get(
    '/org/service-accounts',
    {
      config: { scope: 'org:read' },
      schema: {
        tags,
        querystring: ListServiceAccountsQuery,
        response: { 200: ServiceAccountListSchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const page = await listServiceAccounts(app.db, request.principal!.organizationId, {
        limit: request.query.limit,
        startingAfter: request.query.starting_after,
      });
      return { service_accounts: page.items.map(toServiceAccountBody), has_more: page.hasMore };
    },
  );

  app.get(
    '/org/service-accounts/:service_account_id',
    {
      config: { scope: 'org:read' },
      schema: {
        tags,
        params: ServiceAccountIdParams,
        response: { 200: ServiceAccountSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) =>
      toServiceAccountBody(
        await getServiceAccount(app.db, request.principal!.organizationId, request.params.service_account_id),
      ),
  );

  app.patch(
    '/org/service-accounts/:service_account_id',
    {
      config: { scope: 'org:write', auditService: 'identity' },
      schema: {
        tags,
        params: ServiceAccountIdParams,
        body: UpdateServiceAccountBody,
        response: { 200: ServiceAccountSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          updateServiceAccount(
            trx,
            outcome,
            request.principal!,
            request.params.service_account_id,
            request.body,
          ),
        (account) => ({ status: 200, body: toServiceAccountBody(account) }),
      );
    },
  );
}
