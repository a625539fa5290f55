import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ErrorBodySchema, commonErrorResponses } from '@ent/common/schemas/common';
import {
  ListOverridesQuery,
  OverrideListSchema,
  OverrideParams,
  OverrideSchema,
  OverridesParams,
  PutOverrideBody,
  type OverrideBody,
} from '@ent/common/schemas/overrides';
import { deleteOverride, getOverride, listSubscriberOverrides, upsertOverride } from './service.ts';
import type { OverrideWithFeature } from './store.ts';
import { mustPublish } from '../../plugins/write-pipeline.ts';

export function toOverrideBody(override: OverrideWithFeature): OverrideBody {
  const value =
    override.feature_kind === 'flag'
      ? { allowed: override.allowed ?? false }
      : { limit: override.limit_value };
  return {
    id: override.id,
    subscriber_id: override.subscriber_id,
    feature: override.feature_key,
    kind: override.feature_kind,
    ...value,
    expires_at: override.expires_at ? override.expires_at.toISOString() : null,
    created_at: override.created_at.toISOString(),
    updated_at: override.updated_at.toISOString(),
  };
}

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
    async (request) => {
      const { subscriber_id, feature_key } = request.params;
      return app.writePipeline.transaction(request, async (trx) => {
        const { override, details } = await upsertOverride(
          trx,
          request.principal!.organizationId,
          subscriber_id,
          feature_key,
          request.body,
        );
        const body = toOverrideBody(override);
        mustPublish(request.write, details !== null, { subscriber: subscriber_id });
        request.write.details = details;
        if (details) request.write.events.push({ type: 'override.upserted', data: body });
        return body;
      });
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
      await app.writePipeline.transaction(request, async (trx) => {
        const deleted = await deleteOverride(
          trx,
          request.principal!.organizationId,
          subscriber_id,
          feature_key,
        );
        mustPublish(request.write, Boolean(deleted), { subscriber: subscriber_id });
        request.write.details = null;
        if (deleted) request.write.events.push({ type: 'override.deleted', data: toOverrideBody(deleted) });
      });
      return reply.code(204).send(null);
    },
  );
}
