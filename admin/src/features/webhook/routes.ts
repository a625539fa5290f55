import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Webhook, WebhookDelivery } from '@ent/common/db/database';
import { ErrorBodySchema, NoQuery, commonErrorResponses } from '@ent/contract/common';
import {
  ConsoleWebhookSchema,
  ListDeliveriesQuery,
  PutWebhookBody,
  WebhookDeliveryListSchema,
  WebhookSchema,
  WebhookWithSecretSchema,
  type WebhookBody,
  type WebhookDeliveryBody,
} from '@ent/contract/webhook';
import { registerWebhookDispatch } from './dispatch.ts';
import {
  listWebhookDeliveries,
  putWebhook,
  validateWebhookUrl,
  rotateWebhookSecret,
  setWebhookDisabled,
  previousSecretSigns,
  webhookNotFound,
  type WebhookSettings,
  findOrganizationWebhook,
} from './service.ts';

/** `previous_secret_expires_at` only while the previous secret still signs deliveries (null once it stopped). */
const toWebhookBody = (webhook: Webhook, now: Date): WebhookBody => ({
  url: webhook.url,
  secret_prefix: webhook.secret_prefix,
  disabled: webhook.disabled,
  disabled_reason: webhook.disabled_reason,
  previous_secret_expires_at: previousSecretSigns(webhook, now)
    ? webhook.previous_secret_expires_at!.toISOString()
    : null,
  created_at: webhook.created_at.toISOString(),
  updated_at: webhook.updated_at.toISOString(),
});

const toDeliveryBody = (delivery: WebhookDelivery): WebhookDeliveryBody => ({
  delivery_id: delivery.id,
  event_id: delivery.event_id,
  event_type: delivery.event_type,
  status: delivery.status,
  attempts: delivery.attempts,
  last_status_code: delivery.last_status_code,
  last_error: delivery.last_error,
  next_attempt_at: delivery.next_attempt_at?.toISOString() ?? null,
  delivered_at: delivery.delivered_at?.toISOString() ?? null,
  created_at: delivery.created_at.toISOString(),
  updated_at: delivery.updated_at.toISOString(),
});

const tags = ['webhook'];
const withNotFound = { 404: ErrorBodySchema, ...commonErrorResponses };

export async function webhookRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const settings: WebhookSettings = {
    secretsKey: app.config.secretsKey,
    allowPrivateTargets: app.config.webhookAllowPrivateTargets,
  };
  const now = () => new Date(app.clock.now());
  registerWebhookDispatch(app);

  app.get(
    '/org/webhook',
    { config: { scope: 'org:read' }, schema: { tags, response: { 200: WebhookSchema, ...withNotFound } } },
    async (request) => {
      const webhook = await findOrganizationWebhook(app.db, request.principal!.organizationId);
      if (!webhook) throw webhookNotFound();
      return toWebhookBody(webhook, now());
    },
  );

  // The console's read: a new organization has no webhook, which is an answer and not an error; GET /org/webhook's
  // 404 would be logged by the browser as a failed load on every visit of the page (docs/console-api.md).
  app.get(
    '/console/api/webhook',
    {
      config: { scope: 'org:read' },
      schema: {
        tags: ['console'],
        querystring: NoQuery,
        response: { 200: ConsoleWebhookSchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const webhook = await findOrganizationWebhook(app.db, request.principal!.organizationId);
      return { webhook: webhook ? toWebhookBody(webhook, now()) : null };
    },
  );

  app.put(
    '/org/webhook',
    {
      config: { scope: 'org:write', auditService: 'api' },
      schema: {
        tags,
        body: PutWebhookBody,
        response: { 200: WebhookSchema, 201: WebhookWithSecretSchema, ...commonErrorResponses },
      },
    },
    async (request, reply) => {
      const url = await validateWebhookUrl(request.body.url, settings.allowPrivateTargets);
      return app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          putWebhook(
            trx,
            outcome,
            settings,
            request.principal!.organizationId,
            { ...request.body, url },
            now(),
          ),
        (result) =>
          result.secret
            ? { status: 201, body: { ...toWebhookBody(result.webhook, now()), secret: result.secret } }
            : { status: 200, body: toWebhookBody(result.webhook, now()) },
      );
    },
  );

  app.post(
    '/org/webhook/rotate',
    {
      config: { scope: 'org:write', auditService: 'api' },
      schema: { tags, response: { 200: WebhookWithSecretSchema, ...withNotFound } },
    },
    async (request, reply) =>
      app.writePipeline.answer(
        request,
        reply,
        (trx, outcome) =>
          rotateWebhookSecret(trx, outcome, settings, request.principal!.organizationId, now()),
        ({ webhook, secret }) => ({ status: 200, body: { ...toWebhookBody(webhook, now()), secret } }),
      ),
  );

  for (const action of ['enable', 'disable'] as const) {
    app.post(
      `/org/webhook/${action}`,
      {
        config: { scope: 'org:write', auditService: 'api' },
        schema: { tags, response: { 200: WebhookSchema, ...withNotFound } },
      },
      async (request, reply) =>
        app.writePipeline.answer(
          request,
          reply,
          (trx, outcome) =>
            setWebhookDisabled(trx, outcome, request.principal!.organizationId, action === 'disable', now()),
          (webhook) => ({ status: 200, body: toWebhookBody(webhook, now()) }),
        ),
    );
  }

  app.get(
    '/org/webhook/deliveries',
    {
      config: { scope: 'org:read' },
      schema: {
        tags,
        querystring: ListDeliveriesQuery,
        response: { 200: WebhookDeliveryListSchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const page = await listWebhookDeliveries(app.db, request.principal!.organizationId, {
        limit: request.query.limit,
        startingAfter: request.query.starting_after,
        status: request.query.status,
        eventType: request.query.event_type,
      });
      return { deliveries: page.items.map(toDeliveryBody), has_more: page.hasMore };
    },
  );
}
