import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Subscriber } from '@ent/common/db/database';
import { ErrorBodySchema, commonErrorResponses } from '@ent/common/schemas/common';
import {
  CreateSubscriberBody,
  ListSubscribersQuery,
  SubscriberIdParams,
  SubscriberListSchema,
  SubscriberSchema,
  UpdateSubscriberBody,
  type SubscriberBody,
} from '@ent/common/schemas/subscribers';
import { createSubscriber, getSubscriber, listSubscribers, updateSubscriber } from './service.ts';
import { mustPublish } from '../../plugins/write-pipeline.ts';

export const toSubscriberBody = (subscriber: Subscriber): SubscriberBody => ({
  subscriber_id: subscriber.subscriber_id,
  name: subscriber.name,
  created_at: subscriber.created_at.toISOString(),
  updated_at: subscriber.updated_at.toISOString(),
});

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
      const body = await app.writePipeline.transaction(request, async (trx) => {
        const subscriber = await createSubscriber(trx, request.principal!.organizationId, request.body);
        const body = toSubscriberBody(subscriber);
        request.write.subscribersChanged.add(subscriber.subscriber_id);
        request.write.details = { subscriber_id: subscriber.subscriber_id, name: subscriber.name };
        request.write.events.push({ type: 'subscriber.created', data: body });
        return body;
      });
      return reply.code(201).send(body);
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
    async (request) =>
      app.writePipeline.transaction(request, async (trx) => {
        const { subscriber, details } = await updateSubscriber(
          trx,
          request.principal!.organizationId,
          request.params.subscriber_id,
          request.body,
        );
        const body = toSubscriberBody(subscriber);
        mustPublish(request.write, details !== null, { subscriber: subscriber.subscriber_id });
        request.write.details = details;
        if (details) request.write.events.push({ type: 'subscriber.updated', data: body });
        return body;
      }),
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
