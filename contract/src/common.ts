import { Type, type TSchema } from '@sinclair/typebox';

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC with milliseconds' });
export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

export const ErrorBodySchema = Type.Object(
  {
    error: Type.Object({
      type: Type.String(),
      code: Type.String(),
      message: Type.String(),
      request_id: Type.String(),
      details: Type.Record(Type.String(), Type.Unknown(), {
        description: '`{}` when there is nothing to add',
      }),
    }),
  },
  { $id: 'ErrorBody', description: 'The body of every non-2xx response' },
);

/** Cursor pagination shared by every list: newest or key order as the list documents. */
export const PaginationQuery = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
  starting_after: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
};

export const NoQuery = Type.Object({}, { additionalProperties: false });

/** `{ <name>: [item...], has_more }`. */
export const listOf = <T extends TSchema>(name: string, item: T) =>
  Type.Object({ [name]: Type.Array(item), has_more: Type.Boolean() });

/** Error responses every authenticated route can give; routes add their own on top. */
export const commonErrorResponses = {
  401: ErrorBodySchema,
  403: ErrorBodySchema,
  422: ErrorBodySchema,
  503: ErrorBodySchema,
};

/** Path segment rules: catalog keys (features, plans) and the organization's own subscriber ids. */
export const PLAN_KEY_PATTERN = '^[a-z0-9_-]{1,64}$';
export const FEATURE_KEY_PATTERN = '^[a-z0-9][a-z0-9_.:-]{0,63}$';
export const SUBSCRIBER_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,254}$';
