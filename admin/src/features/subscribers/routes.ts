import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import {
  CreateSubscriberBody,
  ListSubscribersQuery,
  SubscriberIdParams,
  SubscriberListSchema,
  SubscriberSchema,
  UpdateSubscriberBody,
} from '@ent/contract/subscribers';
import {
  createSubscriber,
  getSubscriber,
  listSubscribers,
  toSubscriberBody,
  updateSubscriber,
} from './service.ts';

const tags = ['subscribers'];

export async function subscriberRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.post(
    '/org/subscribers',
    {
      config: { scope: 'subscribers:write', auditService: 'api' },
      schema: {
        tags,
        body: CreateSubscriberBody,
        response: { 201: SubscriberSchema, 409: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) => createSubscriber(trx, outcome, request.principal!.organizationId, request.body),
        (subscriber) => ({ status: 201, body: toSubscriberBody(subscriber) }),
      );
    },
  );

  app.patch(
    '/org/subscribers/:subscriber_id',
    {
      config: { scope: 'subscribers:write', auditService: 'api' },
      schema: {
        tags,
        params: SubscriberIdParams,
        body: UpdateSubscriberBody,
        response: { 200: SubscriberSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) =>
      app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          updateSubscriber(
            trx,
            outcome,
            request.principal!.organizationId,
            request.params.subscriber_id,
            request.body,
          ),
        (subscriber) => ({ status: 200, body: toSubscriberBody(subscriber) }),
      ),
  );

  app.get(
    '/org/subscribers',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        tags,
        querystring: ListSubscribersQuery,
        response: { 200: SubscriberListSchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const page = await listSubscribers(app.db, request.principal!.organizationId, {
        limit: request.query.limit,
        startingAfter: request.query.starting_after,
        search: request.query.search,
      });
      return { subscribers: page.items.map(toSubscriberBody), has_more: page.hasMore };
    },
  );

  app.get(
    '/org/subscribers/:subscriber_id',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        tags,
        params: SubscriberIdParams,
        response: { 200: SubscriberSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) =>
      toSubscriberBody(
        await getSubscriber(app.db, request.principal!.organizationId, request.params.subscriber_id),
      ),
  );
}
