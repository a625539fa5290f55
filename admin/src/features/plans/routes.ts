import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import {
  CreatePlanBody,
  ListPlansQuery,
  PlanKeyParams,
  PlanListSchema,
  PlanReadQuery,
  PlanSchema,
  UpdatePlanBody,
} from '@ent/contract/plans';
import {
  createPlan,
  deletePlan,
  getPlan,
  listPlans,
  setPlanArchived,
  toPlanBody,
  updatePlan,
} from './service.ts';

/** `include=subscriber_count` (beyond SPEC.md, docs/decisions.md "Plans"): the one opt-in addition. */
const readOptions = (query: { include?: 'subscriber_count' | undefined }) => ({
  subscriberCount: query.include === 'subscriber_count',
});

const tags = ['plans'];
const writeConfig = { scope: 'catalog:write', auditService: 'api' } as const;
const readConfig = { scope: 'catalog:read' } as const;

export async function planRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const orgOf = (request: FastifyRequest) => request.principal!.organizationId;

  app.post(
    '/org/plans',
    {
      config: writeConfig,
      schema: {
        tags,
        body: CreatePlanBody,
        response: { 201: PlanSchema, 409: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) => createPlan(trx, outcome, orgOf(request), request.body, app.config.catalogLimits),
        (created) => ({ status: 201, body: toPlanBody(created) }),
      );
    },
  );

  app.get(
    '/org/plans',
    {
      config: readConfig,
      schema: {
        tags,
        querystring: ListPlansQuery,
        response: { 200: PlanListSchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const page = await listPlans(
        app.db,
        orgOf(request),
        { limit: request.query.limit, startingAfter: request.query.starting_after, kind: request.query.kind },
        readOptions(request.query),
      );
      return { plans: page.items.map(toPlanBody), has_more: page.hasMore };
    },
  );

  app.get(
    '/org/plans/:key',
    {
      config: readConfig,
      schema: {
        tags,
        params: PlanKeyParams,
        querystring: PlanReadQuery,
        response: { 200: PlanSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) =>
      toPlanBody(await getPlan(app.db, orgOf(request), request.params.key, readOptions(request.query))),
  );

  app.patch(
    '/org/plans/:key',
    {
      config: writeConfig,
      schema: {
        tags,
        params: PlanKeyParams,
        body: UpdatePlanBody,
        response: { 200: PlanSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) =>
      app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          updatePlan(
            trx,
            outcome,
            orgOf(request),
            request.params.key,
            request.body,
            app.config.catalogLimits,
          ),
        (plan) => ({ status: 200, body: toPlanBody(plan) }),
      ),
  );

  app.delete(
    '/org/plans/:key',
    {
      config: writeConfig,
      schema: {
        tags,
        params: PlanKeyParams,
        response: {
          204: { type: 'null' },
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
        (trx, outcome) => deletePlan(trx, outcome, orgOf(request), request.params.key),
        () => ({ status: 204 }),
      );
    },
  );

  for (const [action, archived] of [
    ['archive', true],
    ['unarchive', false],
  ] as const) {
    app.post(
      `/org/plans/:key/${action}`,
      {
        config: writeConfig,
        schema: {
          tags,
          params: PlanKeyParams,
          response: { 200: PlanSchema, 404: ErrorBodySchema, ...commonErrorResponses },
        },
      },
      async (request, reply) =>
        app.writePipeline.answer(
          request,
          reply,
          (trx, outcome) => setPlanArchived(trx, outcome, orgOf(request), request.params.key, archived),
          (plan) => ({ status: 200, body: toPlanBody(plan) }),
        ),
    );
  }
}
