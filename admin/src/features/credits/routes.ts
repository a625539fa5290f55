import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import {
  CreateCreditBody,
  CreditListSchema,
  CreditParams,
  CreditSchema,
  CreditsParams,
  ListCreditsQuery,
} from '@ent/contract/credits';
import { toCreditBody } from './body.ts';
import { createCredit, listSubscriberCredits, voidCredit } from './service.ts';

const tags = ['credits'];
const base = '/org/subscribers/:subscriber_id/credits';

/** DESIGN.md §5, "Credits": a subscriber's credits on its metered features; scoped and audited like overrides. */
export async function creditRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const deps = { db: app.db, redis: app.redis, redisKeys: app.redisKeys };

  app.post(
    base,
    {
      config: { scope: 'subscribers:write', auditService: 'api' },
      schema: {
        tags,
        params: CreditsParams,
        body: CreateCreditBody,
        response: { 201: CreditSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      const nowMs = app.clock.now();
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          createCredit(
            trx,
            outcome,
            request.principal!.organizationId,
            request.params.subscriber_id,
            request.body,
            nowMs,
          ),
        (credit) => ({ status: 201, body: toCreditBody(credit, 0, nowMs) }),
      );
    },
  );

  app.get(
    base,
    {
      config: { scope: 'subscribers:read' },
      schema: {
        tags,
        params: CreditsParams,
        querystring: ListCreditsQuery,
        response: { 200: CreditListSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const page = await listSubscriberCredits(
        deps,
        request.principal!.organizationId,
        request.params.subscriber_id,
        {
          limit: request.query.limit,
          startingAfter: request.query.starting_after,
          feature: request.query.feature,
          status: request.query.status,
        },
        app.clock.now(),
      );
      return { credits: page.items, has_more: page.hasMore };
    },
  );

  app.delete(
    `${base}/:credit_id`,
    {
      config: { scope: 'subscribers:write', auditService: 'api' },
      schema: {
        tags,
        params: CreditParams,
        response: { 200: CreditSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      const { subscriber_id, credit_id } = request.params;
      const nowMs = app.clock.now();
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          voidCredit(trx, outcome, deps, request.principal!.organizationId, subscriber_id, credit_id, nowMs),
        (credit) => ({ status: 200, body: credit }),
      );
    },
  );
}
