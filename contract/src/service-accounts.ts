import { Type, type Static } from '@sinclair/typebox';
import { PaginationQuery, Timestamp, listOf } from './common.ts';
import { MemberStatusSchema, RoleSchema } from './members.ts';

export const ServiceAccountSchema = Type.Object(
  {
    service_account_id: Type.String(),
    member_id: Type.String(),
    name: Type.String(),
    role: RoleSchema,
    status: MemberStatusSchema,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'ServiceAccount' },
);
export type ServiceAccountBody = Static<typeof ServiceAccountSchema>;

export const ServiceAccountIdParams = Type.Object({
  service_account_id: Type.String({ minLength: 1, maxLength: 255 }),
});

export const CreateServiceAccountBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    role: RoleSchema,
  },
  { additionalProperties: false },
);
export type CreateServiceAccountBody = Static<typeof CreateServiceAccountBody>;

/** The role of a service account is its member's role: change it with PATCH /org/members/{member_id}. */
export const UpdateServiceAccountBody = Type.Object(
  { name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })) },
  { additionalProperties: false },
);
export type UpdateServiceAccountBody = Static<typeof UpdateServiceAccountBody>;

export const ListServiceAccountsQuery = Type.Object({ ...PaginationQuery }, { additionalProperties: false });
export type ListServiceAccountsQuery = Static<typeof ListServiceAccountsQuery>;

export const ServiceAccountListSchema = listOf('service_accounts', ServiceAccountSchema);
