import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorBodySchema, commonErrorResponses } from '@ent/common/schemas/common';
import { SubscriberIdParams } from '@ent/common/schemas/subscribers';
import {
  ChangeSubscriptionBody,
  ChangedSubscriptionSchema,
  CreateSubscriptionBody,
  ListSubscriptionsQuery,
  SubscriptionListSchema,
  SubscriptionParams,
  SubscriptionSchema,
  type SubscriptionBody,
} from '@ent/common/schemas/subscriptions';
import {
  cancelSubscription,
  changeSubscription,
  createSubscription,
  listSubscriberSubscriptions,
} from './service.ts';
import type { SubscriptionWithPlan } from './store.ts';
import { mustPublish } from '../../plugins/write-pipeline.ts';

export const toSubscriptionBody = (subscription: SubscriptionWithPlan): SubscriptionBody => ({
  subscription_id: subscription.id,
  subscriber_id: subscription.subscriber_id,
  plan_id: subscription.plan_key,
  status: subscription.status,
  created_at: subscription.created_at.toISOString(),
  canceled_at: subscription.canceled_at ? subscription.canceled_at.toISOString() : null,
});

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
      const body = await app.writePipeline.transaction(request, async (trx) => {
        const created = await createSubscription(
          trx,
          request.principal!.organizationId,
          subscriber_id,
          request.body.plan_id,
        );
        const body = toSubscriptionBody(created);
        request.write.subscribersChanged.add(subscriber_id);
        request.write.details = { subscription_id: created.id, plan_id: created.plan_key };
        request.write.events.push({ type: 'subscription.created', data: body });
        return body;
      });
      return reply.code(201).send(body);
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
      const body = await app.writePipeline.transaction(request, async (trx) => {
        const { created, canceled } = await changeSubscription(
          trx,
          request.principal!.organizationId,
          subscriber_id,
          request.body,
        );
        const body = { ...toSubscriptionBody(created), canceled_subscription_id: canceled.id };
        request.write.subscribersChanged.add(subscriber_id);
        request.write.details = {
          subscription_id: created.id,
          canceled_subscription_id: canceled.id,
          plan_id: { from: canceled.plan_key, to: created.plan_key },
        };
        request.write.events.push({ type: 'subscription.changed', data: body });
        return body;
      });
      return reply.code(201).send(body);
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
    async (request) => {
      const { subscriber_id, subscription_id } = request.params;
      return app.writePipeline.transaction(request, async (trx) => {
        const { subscription, details } = await cancelSubscription(
          trx,
          request.principal!.organizationId,
          subscriber_id,
          subscription_id,
        );
        const body = toSubscriptionBody(subscription);
        mustPublish(request.write, details !== null, { subscriber: subscriber_id });
        request.write.details = details;
        if (details) request.write.events.push({ type: 'subscription.canceled', data: body });
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
