import { Type, type Static } from '@sinclair/typebox';
import { NullableTimestamp, PaginationQuery, Timestamp, listOf } from './common.ts';

export const SubscriptionStatusSchema = Type.Union([Type.Literal('active'), Type.Literal('canceled')]);

const subscriptionFields = {
  subscription_id: Type.String(),
  subscriber_id: Type.String(),
  plan_id: Type.String({ description: 'the plan key' }),
  status: SubscriptionStatusSchema,
  created_at: Timestamp,
  canceled_at: NullableTimestamp,
};

export const SubscriptionSchema = Type.Object(subscriptionFields, { $id: 'Subscription' });
export type SubscriptionBody = Static<typeof SubscriptionSchema>;

export const ChangedSubscriptionSchema = Type.Object({
  ...subscriptionFields,
  canceled_subscription_id: Type.String({ description: 'the subscription the change ended' }),
});
export type ChangedSubscriptionBody = Static<typeof ChangedSubscriptionSchema>;

export const SubscriptionParams = Type.Object({
  subscriber_id: Type.String({ minLength: 1, maxLength: 255 }),
  subscription_id: Type.String({ minLength: 1, maxLength: 255 }),
});
export type SubscriptionParams = Static<typeof SubscriptionParams>;

const PlanKeyInput = Type.String({ minLength: 1, maxLength: 255, description: 'the plan key' });

export const CreateSubscriptionBody = Type.Object({ plan_id: PlanKeyInput }, { additionalProperties: false });
export type CreateSubscriptionBody = Static<typeof CreateSubscriptionBody>;

export const ChangeSubscriptionBody = Type.Object(
  {
    plan_id: PlanKeyInput,
    subscription_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description: 'the active subscription to end; may be omitted when the subscriber has exactly one',
      }),
    ),
  },
  { additionalProperties: false },
);
export type ChangeSubscriptionBody = Static<typeof ChangeSubscriptionBody>;

export const ListSubscriptionsQuery = Type.Object(
  { ...PaginationQuery, status: Type.Optional(SubscriptionStatusSchema) },
  { additionalProperties: false },
);
export type ListSubscriptionsQuery = Static<typeof ListSubscriptionsQuery>;

export const SubscriptionListSchema = listOf('subscriptions', SubscriptionSchema);
