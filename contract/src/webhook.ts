import { Type, type Static } from '@sinclair/typebox';
import { NullableTimestamp, PaginationQuery, Timestamp, listOf } from './common.ts';

export const WebhookSchema = Type.Object(
  {
    url: Type.String(),
    /** `whsec_` and the first 8 characters of the secret. */
    secret_prefix: Type.String(),
    disabled: Type.Boolean(),
    /** Set when the service disabled the endpoint itself (it answered 410 Gone). */
    disabled_reason: Type.Union([Type.String(), Type.Null()]),
    /** Until then the previous secret's signature is sent as well (24 hours after a rotation). */
    previous_secret_expires_at: NullableTimestamp,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Webhook' },
);
export type WebhookBody = Static<typeof WebhookSchema>;

/** GET /console/api/webhook: the console's read, where having none is an answer (null), not a 404. */
export const ConsoleWebhookSchema = Type.Object(
  { webhook: Type.Union([WebhookSchema, Type.Null()]) },
  { $id: 'ConsoleWebhook' },
);
export type ConsoleWebhookBody = Static<typeof ConsoleWebhookSchema>;

/** PUT (create) and rotate: the only times the signing secret is shown. */
export const WebhookWithSecretSchema = Type.Composite(
  [WebhookSchema, Type.Object({ secret: Type.String() })],
  {
    $id: 'WebhookWithSecret',
  },
);
export type WebhookWithSecretBody = Static<typeof WebhookWithSecretSchema>;

export const PutWebhookBody = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2048, description: 'http or https URL' }),
    disabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type PutWebhookBody = Static<typeof PutWebhookBody>;

export const DeliveryStatusSchema = Type.Union([
  Type.Literal('pending'),
  Type.Literal('succeeded'),
  Type.Literal('failed'),
  Type.Literal('canceled'),
]);

export const WebhookDeliverySchema = Type.Object(
  {
    delivery_id: Type.String(),
    event_id: Type.String({ description: 'the `webhook-id` header and the payload `id`' }),
    event_type: Type.String(),
    status: DeliveryStatusSchema,
    attempts: Type.Integer(),
    last_status_code: Type.Union([Type.Integer(), Type.Null()]),
    last_error: Type.Union([Type.String(), Type.Null()]),
    next_attempt_at: NullableTimestamp,
    delivered_at: NullableTimestamp,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'WebhookDelivery' },
);
export type WebhookDeliveryBody = Static<typeof WebhookDeliverySchema>;

export const ListDeliveriesQuery = Type.Object(
  {
    ...PaginationQuery,
    status: Type.Optional(DeliveryStatusSchema),
    event_type: Type.Optional(Type.String({ maxLength: 255 })),
  },
  { additionalProperties: false },
);
export type ListDeliveriesQuery = Static<typeof ListDeliveriesQuery>;

export const WebhookDeliveryListSchema = listOf('deliveries', WebhookDeliverySchema);
