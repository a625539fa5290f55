import { Type, type Static } from '@sinclair/typebox';
import { Timestamp } from './common.ts';

export const ORGANIZATION_SLUG_PATTERN = '^[a-z0-9][a-z0-9-]{0,62}$';

export const OrganizationSchema = Type.Object(
  {
    organization_id: Type.String(),
    name: Type.String(),
    slug: Type.String(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Organization' },
);
export type OrganizationBody = Static<typeof OrganizationSchema>;

export const UpdateOrganizationBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    slug: Type.Optional(
      Type.String({
        pattern: ORGANIZATION_SLUG_PATTERN,
        description: 'lowercase letters, digits and dashes; at most 63',
      }),
    ),
  },
  { additionalProperties: false },
);
export type UpdateOrganizationBody = Static<typeof UpdateOrganizationBody>;
