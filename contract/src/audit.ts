import { Type, type Static, type TLiteral, type TOptional, type TString } from '@sinclair/typebox';
import { Timestamp, listOf } from './common.ts';

export const AUDIT_OUTCOMES = ['pending', 'rejected', 'responded', 'no_response'] as const;
export type AuditOutcomeName = (typeof AUDIT_OUTCOMES)[number];
// HEAD too: a HEAD on the invite list is a listing of invites, recorded like the GET it mirrors.
export const AUDIT_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE', 'GET', 'HEAD'] as const;
export const AUDIT_SERVICES = ['api', 'identity'] as const;

const AuditOutcome = Type.Union(
  AUDIT_OUTCOMES.map((value) => Type.Literal(value)) as [TLiteral<AuditOutcomeName>],
);
const AuditMethod = Type.Union(
  AUDIT_METHODS.map((value) => Type.Literal(value)) as [TLiteral<(typeof AUDIT_METHODS)[number]>],
);
const AuditService = Type.Union([Type.Literal('api'), Type.Literal('identity')]);

export const AUDIT_ID_PATTERN = '^aud_[0-9a-z]{26}$';
/**
 * The path value names of the /org routes (an entry's `params` holds only these): what `params[<name>]` may filter on.
 * Any other name is an unknown query parameter (422) like any other, whatever it is (`__proto__`, `constructor`).
 * admin/test/audit/reading.test.ts checks the list against the routes.
 */
export const AUDIT_PATH_VALUE_NAMES = [
  'credit_id',
  'feature',
  'feature_key',
  'import_id',
  'invite_id',
  'key',
  'key_id',
  'member_id',
  'service_account_id',
  'subscriber_id',
  'subscription_id',
] as const;
type AuditPathValueName = (typeof AUDIT_PATH_VALUE_NAMES)[number];

export const AuditEventSchema = Type.Object(
  {
    id: Type.String(),
    occurred_at: Timestamp,
    request_id: Type.String(),
    organization_id: Type.String(),
    actor: Type.Object({
      member_id: Type.String(),
      auth_type: Type.Union([Type.Literal('member_apikey'), Type.Literal('member_session')]),
      key_prefix: Type.String(),
    }),
    service: AuditService,
    method: Type.String(),
    route: Type.String({ description: 'the route template, e.g. /org/plans/{key}' }),
    params: Type.Record(Type.String(), Type.String()),
    ip: Type.String(),
    user_agent: Type.Union([Type.String(), Type.Null()]),
    outcome: AuditOutcome,
    status: Type.Union([Type.Integer(), Type.Null()], {
      description: 'the HTTP status when the outcome is responded',
    }),
    details: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
  },
  { $id: 'AuditEvent' },
);
export type AuditEventBody = Static<typeof AuditEventSchema>;

export const AuditEventListSchema = listOf('audit_events', AuditEventSchema);

/** `params[<name>]`: a route's path value by name; several combine with AND. */
const pathValueFilters = Object.fromEntries(
  AUDIT_PATH_VALUE_NAMES.map((name) => [
    `params[${name}]`,
    Type.Optional(
      Type.String({ minLength: 1, maxLength: 255, description: `entries whose path value ${name} is this` }),
    ),
  ]),
) as Record<`params[${AuditPathValueName}]`, TOptional<TString>>;

export const ListAuditEventsQuery = Type.Object(
  {
    ...pathValueFilters,
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    starting_after: Type.Optional(Type.String({ pattern: AUDIT_ID_PATTERN, description: 'an entry id' })),
    actor_member_id: Type.Optional(Type.String({ pattern: '^mem_[0-9a-z]{26}$' })),
    outcome: Type.Optional(AuditOutcome),
    method: Type.Optional(AuditMethod),
    route: Type.Optional(Type.String({ pattern: '^/org(/[^\\s?#]*)?$', maxLength: 255 })),
    service: Type.Optional(AuditService),
    request_id: Type.Optional(Type.String({ pattern: '^req_[0-9a-z]{26}$' })),
    occurred_after: Type.Optional(Type.String({ format: 'date-time', description: 'RFC 3339, inclusive' })),
    occurred_before: Type.Optional(Type.String({ format: 'date-time', description: 'RFC 3339, exclusive' })),
  },
  { additionalProperties: false },
);
export type ListAuditEventsQuery = Static<typeof ListAuditEventsQuery>;
