import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import { SubscriberIdParams } from '@ent/contract/subscribers';
import {
  ChangeSubscriptionBody,
  ChangedSubscriptionSchema,
  CreateSubscriptionBody,
  ListSubscriptionsQuery,
  SubscriptionListSchema,
  SubscriptionParams,
  SubscriptionSchema,
} from '@ent/contract/subscriptions';
import {
  cancelSubscription,
  changeSubscription,
  createSubscription,
  listSubscriberSubscriptions,
  toChangedSubscriptionBody,
  toSubscriptionBody,
} from './service.ts';

const tags = ['subscriptions'];
const base = '/org/subscribers/:subscriber_id/subscriptions';

export async function subscriptionRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.post(
    base,
    {
      config: { scope: 'subscribers:write', auditService: 'api' },
      schema: {
        tags,
        params: SubscriberIdParams,
        body: CreateSubscriptionBody,
        response: {
          201: SubscriptionSchema,
          404: ErrorBodySchema,
          409: ErrorBodySchema,
          ...commonErrorResponses,
        },
      },
    },
    async (request, reply) => {
      const { subscriber_id } = request.params;
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          createSubscription(
            trx,
            outcome,
            request.principal!.organizationId,
            subscriber_id,
            request.body.plan_id,
          ),
        (created) => ({ status: 201, body: toSubscriptionBody(created) }),
      );
    },
  );

  app.post(
    `${base}/change`,
    {
      config: { scope: 'subscribers:write', auditService: 'api' },
      schema: {
        tags,
        params: SubscriberIdParams,
        body: ChangeSubscriptionBody,
        response: {
          201: ChangedSubscriptionSchema,
          404: ErrorBodySchema,
          409: ErrorBodySchema,
          ...commonErrorResponses,
        },
      },
    },
    async (request, reply) => {
      const { subscriber_id } = request.params;
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          changeSubscription(trx, outcome, request.principal!.organizationId, subscriber_id, request.body),
        (change) => ({ status: 201, body: toChangedSubscriptionBody(change) }),
      );
    },
  );

  app.post(
    `${base}/:subscription_id/cancel`,
    {
      config: { scope: 'subscribers:write', auditService: 'api' },
      schema: {
        tags,
        params: SubscriptionParams,
        response: { 200: SubscriptionSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      const { subscriber_id, subscription_id } = request.params;
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          cancelSubscription(trx, outcome, request.principal!.organizationId, subscriber_id, subscription_id),
        (subscription) => ({ status: 200, body: toSubscriptionBody(subscription) }),
      );
    },
  );

  app.get(
    base,
    {
      config: { scope: 'subscribers:read' },
      schema: {
        tags,
        params: SubscriberIdParams,
        querystring: ListSubscriptionsQuery,
        response: { 200: SubscriptionListSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const page = await listSubscriberSubscriptions(
        app.db,
        request.principal!.organizationId,
        request.params.subscriber_id,
        {
          limit: request.query.limit,
          startingAfter: request.query.starting_after,
          status: request.query.status,
        },
      );
      return { subscriptions: page.items.map(toSubscriptionBody), has_more: page.hasMore };
    },
  );
}
