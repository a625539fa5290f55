import { Type, type Static } from '@sinclair/typebox';
import { NullableTimestamp, PaginationQuery, Timestamp, listOf } from './common.ts';
import { FeatureKindSchema } from './features.ts';

const OverrideLimit = Type.Union(
  [Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), Type.Null()],
  {
    description: 'integer >= 0; null = unlimited',
  },
);

export const OverrideSchema = Type.Object(
  {
    id: Type.String(),
    subscriber_id: Type.String(),
    feature: Type.String({ description: 'the feature key' }),
    kind: FeatureKindSchema,
    allowed: Type.Optional(Type.Boolean({ description: 'present when kind is flag' })),
    limit: Type.Optional(
      Type.Union([Type.Integer(), Type.Null()], { description: 'present when kind is limit or metered' }),
    ),
    expires_at: NullableTimestamp,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Override' },
);
export type OverrideBody = Static<typeof OverrideSchema>;

export const OverridesParams = Type.Object({ subscriber_id: Type.String({ minLength: 1, maxLength: 255 }) });
export type OverridesParams = Static<typeof OverridesParams>;

export const OverrideParams = Type.Object({
  subscriber_id: Type.String({ minLength: 1, maxLength: 255 }),
  feature_key: Type.String({ minLength: 1, maxLength: 255 }),
});
export type OverrideParams = Static<typeof OverrideParams>;

/**
 * The rules that depend on `kind` (a flag carries `allowed` and no `limit`, a limit carries `limit` and no
 * `allowed`) and on the catalog (kind equals the feature's kind) are checked by the service, so the error
 * names the field that broke them.
 */
export const PutOverrideBody = Type.Object(
  {
    kind: FeatureKindSchema,
    allowed: Type.Optional(Type.Boolean()),
    limit: Type.Optional(OverrideLimit),
    expires_at: Type.Optional(
      Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
        description: 'ISO 8601 with a time zone; null or omitted = no expiry; a past time is accepted',
      }),
    ),
  },
  { additionalProperties: false },
);
export type PutOverrideBody = Static<typeof PutOverrideBody>;

export const ListOverridesQuery = Type.Object(
  {
    ...PaginationQuery,
    include_expired: Type.Optional(
      Type.Boolean({ default: false, description: 'expired = expires_at <= now' }),
    ),
  },
  { additionalProperties: false },
);
export type ListOverridesQuery = Static<typeof ListOverridesQuery>;

export const OverrideListSchema = listOf('overrides', OverrideSchema);
