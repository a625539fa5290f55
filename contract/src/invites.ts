import { Type, type Static } from '@sinclair/typebox';
import { PaginationQuery, Timestamp, listOf } from './common.ts';
import { RoleSchema } from './members.ts';

export const InviteSchema = Type.Object(
  {
    invite_id: Type.String(),
    role: RoleSchema,
    email: Type.Union([Type.String(), Type.Null()]),
    /**
     * The single-use link that joins the organization with `role`, while the invite is live; `null` in a list read
     * by a caller who could not create an invite of that role (reading the link would hand over the role).
     */
    url: Type.Union([Type.String(), Type.Null()]),
    expires_at: Timestamp,
    created_at: Timestamp,
  },
  { $id: 'Invite' },
);
export type InviteBody = Static<typeof InviteSchema>;

export const InviteIdParams = Type.Object({ invite_id: Type.String({ minLength: 1, maxLength: 255 }) });

export const CreateInviteBody = Type.Object(
  {
    role: RoleSchema,
    email: Type.Optional(Type.String({ format: 'email', maxLength: 320 })),
  },
  { additionalProperties: false },
);
export type CreateInviteBody = Static<typeof CreateInviteBody>;

export const ListInvitesQuery = Type.Object({ ...PaginationQuery }, { additionalProperties: false });
export type ListInvitesQuery = Static<typeof ListInvitesQuery>;

export const InviteListSchema = listOf('invites', InviteSchema);
