import { Type, type Static } from '@sinclair/typebox';
import { Timestamp } from './common.ts';
import { RoleSchema } from './members.ts';
import { ORGANIZATION_SLUG_PATTERN } from './organization.ts';

/** docs/console-api.md: the console's own routes under /console/api. */

const Email = Type.String({ format: 'email', maxLength: 320 });
/** A new password: 10 to 200 characters (scrypt's cost does not depend on the length; the cap bounds the body). */
const NewPassword = Type.String({ minLength: 10, maxLength: 200 });
const PersonName = Type.String({ minLength: 1, maxLength: 255 });

const OrganizationNameSlug = Type.Object({ name: Type.String(), slug: Type.String() });

export const ConsoleSessionSchema = Type.Object(
  {
    member: Type.Object({
      member_id: Type.String(),
      email: Type.String(),
      name: Type.Union([Type.String(), Type.Null()]),
      role: RoleSchema,
    }),
    organization: OrganizationNameSlug,
    /** Sent back as X-CSRF-Token on every cookie-authenticated write. */
    csrf_token: Type.String(),
    expires_at: Timestamp,
  },
  { $id: 'ConsoleSession' },
);
export type ConsoleSessionBody = Static<typeof ConsoleSessionSchema>;

export const SignUpBody = Type.Object(
  {
    email: Email,
    password: NewPassword,
    name: Type.Optional(PersonName),
    organization: Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 255 }),
        slug: Type.String({
          pattern: ORGANIZATION_SLUG_PATTERN,
          description: 'lowercase letters, digits and dashes; at most 63',
        }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type SignUpBody = Static<typeof SignUpBody>;

/** Nothing here is checked beyond its size: every wrong part gets the same 401. */
export const SignInBody = Type.Object(
  {
    organization: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 63,
        description:
          "the organization's slug; without it, every organization where this email and password match",
      }),
    ),
    email: Type.String({ minLength: 1, maxLength: 320 }),
    password: Type.String({ minLength: 1, maxLength: 200 }),
  },
  { additionalProperties: false },
);
export type SignInBody = Static<typeof SignInBody>;

/**
 * The answer to a sign-in without `organization` whose email and password match in several organizations: no
 * session yet; the console signs in again naming the one the person picks.
 */
export const OrganizationChoiceSchema = Type.Object(
  { organizations: Type.Array(OrganizationNameSlug, { minItems: 2 }) },
  { $id: 'ConsoleOrganizationChoice' },
);
export type OrganizationChoiceBody = Static<typeof OrganizationChoiceSchema>;

export const ChangePasswordBody = Type.Object(
  {
    current_password: Type.String({ minLength: 1, maxLength: 200 }),
    new_password: NewPassword,
  },
  { additionalProperties: false },
);
export type ChangePasswordBody = Static<typeof ChangePasswordBody>;

export const InviteTokenParams = Type.Object({ token: Type.String({ minLength: 1, maxLength: 255 }) });

export const InviteStatusSchema = Type.Union([
  Type.Literal('pending'),
  Type.Literal('accepted'),
  Type.Literal('expired'),
  Type.Literal('revoked'),
]);
export type InviteStatus = Static<typeof InviteStatusSchema>;

export const InvitePreviewSchema = Type.Object(
  {
    organization: OrganizationNameSlug,
    role: RoleSchema,
    email: Type.Union([Type.String(), Type.Null()]),
    expires_at: Timestamp,
    status: InviteStatusSchema,
  },
  { $id: 'InvitePreview' },
);
export type InvitePreviewBody = Static<typeof InvitePreviewSchema>;

export const AcceptInviteBody = Type.Object(
  {
    password: NewPassword,
    name: Type.Optional(PersonName),
    /** Required when the invite names no email; when it names one, omitted or the same. */
    email: Type.Optional(Email),
  },
  { additionalProperties: false },
);
export type AcceptInviteBody = Static<typeof AcceptInviteBody>;
