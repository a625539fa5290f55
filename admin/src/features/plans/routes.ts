import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorBodySchema, commonErrorResponses } from '@ent/common/schemas/common';
import {
  CreatePlanBody,
  ListPlansQuery,
  PlanKeyParams,
  PlanListSchema,
  PlanReadQuery,
  PlanSchema,
  UpdatePlanBody,
  type PlanBody,
} from '@ent/common/schemas/plans';
import { planCreatedDetails } from './grant-changes.ts';
import { mustPublish } from '../../plugins/write-pipeline.ts';
import {
  createPlan,
  deletePlan,
  getPlan,
  listPlans,
  planState,
  setPlanArchived,
  updatePlan,
  type PlanWithGrants,
  type PlanWriteResult,
} from './service.ts';

export const toPlanBody = ({ plan, grants, subscriberCount }: PlanWithGrants): PlanBody => ({
  key: plan.key,
  name: plan.name,
  kind: plan.kind,
  archived: plan.archived_at !== null,
  grants,
  created_at: plan.created_at.toISOString(),
  updated_at: plan.updated_at.toISOString(),
  ...(subscriberCount === undefined ? {} : { subscriber_count: subscriberCount }),
});

/** `include=subscriber_count` (beyond SPEC.md, docs/decisions.md "Plans"): the one opt-in addition. */
const readOptions = (query: { include?: 'subscriber_count' | undefined }) => ({
  subscriberCount: query.include === 'subscriber_count',
});

const tags = ['plans'];
const writeConfig = { scope: 'catalog:write', auditService: 'api' } as const;
const readConfig = { scope: 'catalog:read' } as const;

/** Reports a write on the write path; a no-op (null details) is neither an event nor audited as a change. */
function reportWrite(request: FastifyRequest, type: string, result: PlanWriteResult): PlanBody {
  const body = toPlanBody(result);
  mustPublish(request.write, result.details !== null, { catalog: true });
  request.write.details = result.details;
  if (result.details) request.write.events.push({ type, data: body });
  return body;
}

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
      const body = await app.writePipeline.transaction(request, async (trx) => {
        const created = await createPlan(trx, orgOf(request), request.body, app.config.catalogLimits);
        const body = toPlanBody(created);
        request.write.catalogChanged = true;
        request.write.details = planCreatedDetails(planState(created));
        request.write.events.push({ type: 'plan.created', data: body });
        return body;
      });
      return reply.code(201).send(body);
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
    async (request) =>
      app.writePipeline.transaction(request, async (trx) =>
        reportWrite(
          request,
          'plan.updated',
          await updatePlan(trx, orgOf(request), request.params.key, request.body, app.config.catalogLimits),
        ),
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
      await app.writePipeline.transaction(request, async (trx) => {
        const deleted = await deletePlan(trx, orgOf(request), request.params.key);
        request.write.catalogChanged = true;
        request.write.details = null;
        request.write.events.push({ type: 'plan.deleted', data: toPlanBody(deleted) });
      });
      return reply.code(204).send();
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
      async (request) =>
        app.writePipeline.transaction(request, async (trx) =>
          reportWrite(
            request,
            archived ? 'plan.archived' : 'plan.unarchived',
            await setPlanArchived(trx, orgOf(request), request.params.key, archived),
          ),
        ),
    );
  }
}
