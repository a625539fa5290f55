import { Type, type Static } from '@sinclair/typebox';
import { PaginationQuery, Timestamp, listOf } from './common.ts';

export const RoleSchema = Type.Union([
  Type.Literal('admin'),
  Type.Literal('developer'),
  Type.Literal('viewer'),
]);
export const MemberStatusSchema = Type.Union([
  Type.Literal('active'),
  Type.Literal('suspended'),
  Type.Literal('removed'),
]);

export const MemberSchema = Type.Object(
  {
    member_id: Type.String(),
    kind: Type.Union([Type.Literal('user'), Type.Literal('service_account')]),
    email: Type.Union([Type.String(), Type.Null()]),
    name: Type.Union([Type.String(), Type.Null()]),
    role: RoleSchema,
    status: MemberStatusSchema,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Member' },
);
export type MemberBody = Static<typeof MemberSchema>;

export const MemberIdParams = Type.Object({ member_id: Type.String({ minLength: 1, maxLength: 255 }) });

export const CreateMemberBody = Type.Object(
  {
    email: Type.String({ format: 'email', maxLength: 320 }),
    role: RoleSchema,
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  },
  { additionalProperties: false },
);
export type CreateMemberBody = Static<typeof CreateMemberBody>;

export const UpdateMemberBody = Type.Object(
  {
    role: Type.Optional(RoleSchema),
    status: Type.Optional(MemberStatusSchema),
    revoke_minted_keys: Type.Optional(
      Type.Boolean({
        description:
          'For a removal or a demotion; omitted: `true`. Revoke every live API key the member minted (GET /org/members/{member_id}/minted-keys lists them) in the same write. `false` keeps them (the audit entry records the choice). Refused (422) on a request that names neither `status: "removed"` nor a `role`.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type UpdateMemberBody = Static<typeof UpdateMemberBody>;

export const ListMembersQuery = Type.Object(
  {
    ...PaginationQuery,
    status: Type.Optional(MemberStatusSchema),
    kind: Type.Optional(Type.Union([Type.Literal('user'), Type.Literal('service_account')])),
  },
  { additionalProperties: false },
);
export type ListMembersQuery = Static<typeof ListMembersQuery>;

export const MemberListSchema = listOf('members', MemberSchema);

export const ListMintedKeysQuery = Type.Object({ ...PaginationQuery }, { additionalProperties: false });
export type ListMintedKeysQuery = Static<typeof ListMintedKeysQuery>;
