import { Type, type Static } from '@sinclair/typebox';
import { SCOPES } from './scopes.ts';
import { NullableTimestamp, PaginationQuery, Timestamp, listOf } from './common.ts';

export const ScopeSchema = Type.Union(SCOPES.map((scope) => Type.Literal(scope)));

export const ApiKeySchema = Type.Object(
  {
    key_id: Type.String(),
    key_prefix: Type.String({ description: '`svc-mk-1-` and the first 8 characters of the secret' }),
    name: Type.String(),
    service_account_id: Type.String(),
    /** Empty = full access (everything the service account's role allows). */
    scopes: Type.Array(ScopeSchema),
    created_at: Timestamp,
    revoked_at: NullableTimestamp,
    minted_by: Type.Union(
      [
        Type.Object({
          member_id: Type.String(),
          email: Type.Union([Type.String(), Type.Null()]),
        }),
        Type.Null(),
      ],
      {
        description:
          'The person who could have copied the key: the console member who created it, or whoever minted the key it was created with. Removing or demoting that member revokes it (unless the request keeps it). null: not recorded (keys created before minters were recorded, the key provisioning creates, and keys created with one of those).',
      },
    ),
    minted_with_key_id: Type.Union([Type.String(), Type.Null()], {
      description: 'The API key this key was created with; null when a console session created it.',
    }),
  },
  { $id: 'ApiKey' },
);
export type ApiKeyBody = Static<typeof ApiKeySchema>;

/** The create response: the only time the plaintext key is ever shown. */
export const CreatedApiKeySchema = Type.Composite([ApiKeySchema, Type.Object({ api_key: Type.String() })], {
  $id: 'CreatedApiKey',
});
export type CreatedApiKeyBody = Static<typeof CreatedApiKeySchema>;

export const ApiKeyParams = Type.Object({
  service_account_id: Type.String({ minLength: 1, maxLength: 255 }),
  key_id: Type.String({ minLength: 1, maxLength: 255 }),
});

export const CreateApiKeyBody = Type.Object(
  {
    name: Type.Optional(Type.String({ maxLength: 255 })),
    /** Omitted: `["check"]`. Empty: full access. */
    scopes: Type.Optional(Type.Array(ScopeSchema, { uniqueItems: true, maxItems: SCOPES.length })),
  },
  { additionalProperties: false },
);
export type CreateApiKeyBody = Static<typeof CreateApiKeyBody>;

export const ListApiKeysQuery = Type.Object({ ...PaginationQuery }, { additionalProperties: false });
export type ListApiKeysQuery = Static<typeof ListApiKeysQuery>;

export const ApiKeyListSchema = listOf('api_keys', ApiKeySchema);
