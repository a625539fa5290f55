import { Type, type Static } from '@sinclair/typebox';
import { PaginationQuery, SUBSCRIBER_ID_PATTERN, Timestamp, listOf } from './common.ts';

const SubscriberName = Type.Union([Type.String({ maxLength: 255 }), Type.Null()], {
  description: 'null = no name',
});

export const SubscriberSchema = Type.Object(
  {
    subscriber_id: Type.String(),
    name: Type.Union([Type.String(), Type.Null()]),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Subscriber' },
);
export type SubscriberBody = Static<typeof SubscriberSchema>;

/** Path form: any non-empty value; an id that was never created is a 404, not a 422. */
export const SubscriberIdParams = Type.Object({
  subscriber_id: Type.String({ minLength: 1, maxLength: 255 }),
});
export type SubscriberIdParams = Static<typeof SubscriberIdParams>;

export const CreateSubscriberBody = Type.Object(
  {
    subscriber_id: Type.String({
      pattern: SUBSCRIBER_ID_PATTERN,
      description:
        'chosen by the organization: letters, digits and _ . : @ + -, starting with a letter or digit; at most 255',
    }),
    name: Type.Optional(SubscriberName),
  },
  { additionalProperties: false },
);
export type CreateSubscriberBody = Static<typeof CreateSubscriberBody>;

export const UpdateSubscriberBody = Type.Object(
  { name: Type.Optional(SubscriberName) },
  { additionalProperties: false },
);
export type UpdateSubscriberBody = Static<typeof UpdateSubscriberBody>;

export const ListSubscribersQuery = Type.Object(
  {
    ...PaginationQuery,
    search: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          'subscribers whose id starts with it or whose name contains it, ignoring case; `%` and `_` match themselves',
      }),
    ),
  },
  { additionalProperties: false },
);
export type ListSubscribersQuery = Static<typeof ListSubscribersQuery>;

export const SubscriberListSchema = listOf('subscribers', SubscriberSchema);
