/**
 * The shapes the console reads and sends, as common/src/schemas/* define them (the console is a separate
 * browser bundle, so it keeps its own copy of the types instead of importing the server's TypeBox schemas).
 */

import type { Role, Scope } from '@ent/common/auth/scopes';

// Roles and scopes are the server's own lists (that module imports nothing, so the bundle takes it as is).
export { ROLES, ROLE_RANK, type Role, type Scope } from '@ent/common/auth/scopes';

export interface Page {
  has_more: boolean;
}

export type FeatureKind = 'flag' | 'limit';

export interface Feature {
  key: string;
  name: string;
  description: string;
  kind: FeatureKind;
  created_at: string;
  updated_at: string;
}

export type Grant =
  { feature: string; kind: 'flag' } | { feature: string; kind: 'limit'; limit: number | null };

export type PlanKind = 'catalog' | 'custom';

export interface Plan {
  key: string;
  name: string;
  kind: PlanKind;
  archived: boolean;
  grants: Grant[];
  created_at: string;
  updated_at: string;
  /** Active subscriptions; present only when asked for (`include=subscriber_count`). */
  subscriber_count?: number;
}

export interface Subscriber {
  subscriber_id: string;
  name: string | null;
  created_at: string;
  updated_at: string;
}

export interface Subscription {
  subscription_id: string;
  subscriber_id: string;
  plan_id: string;
  status: 'active' | 'canceled';
  created_at: string;
  canceled_at: string | null;
}

export interface Override {
  id: string;
  subscriber_id: string;
  feature: string;
  kind: FeatureKind;
  allowed?: boolean;
  limit?: number | null;
  expires_at: string | null;
  created_at: string;
  updated_at: string;
}

export type EntitlementSource = 'override' | 'plan' | 'none';

export type Entitlement =
  | { feature: string; kind: 'flag'; allowed: boolean; source: EntitlementSource }
  | { feature: string; kind: 'limit'; limit: number | null; source: EntitlementSource };

export interface EntitlementList {
  subscriber_id: string;
  entitlements: Entitlement[];
}

export interface UsageRecord {
  gated: boolean;
  reason: string | null;
  period: string;
  count: number;
  limit: number | null;
  plan: string | null;
  blocking: boolean;
  warn: '80' | '100' | 'grace' | null;
  allowed: boolean;
  first_over_at: string | null;
  blocked_at: string | null;
}

/** One UTC month of GET /org/usage/history: `days` are cumulative counts, oldest first. */
export interface UsageMonth {
  period: string;
  count: number;
  limit: number | null;
  days: { date: string; count: number }[];
}

export interface UsageHistory {
  /** Newest first: the current month, then each earlier month with recorded usage. */
  months: UsageMonth[];
}

export type AuditOutcome = 'pending' | 'rejected' | 'responded' | 'no_response';

export interface AuditEvent {
  id: string;
  occurred_at: string;
  request_id: string;
  organization_id: string;
  actor: { member_id: string; auth_type: 'member_apikey' | 'member_session'; key_prefix: string };
  service: 'api' | 'identity';
  method: string;
  route: string;
  params: Record<string, string>;
  ip: string;
  user_agent: string | null;
  outcome: AuditOutcome;
  status: number | null;
  details: Record<string, unknown> | null;
}

export type MemberStatus = 'active' | 'suspended' | 'removed';

export interface Member {
  member_id: string;
  kind: 'user' | 'service_account';
  email: string | null;
  name: string | null;
  role: Role;
  status: MemberStatus;
  created_at: string;
  updated_at: string;
}

export interface Invite {
  invite_id: string;
  role: Role;
  email: string | null;
  /** null in a list, for an invite to a role the viewer may not grant (the link would hand it over). */
  url: string | null;
  expires_at: string;
  created_at: string;
}

export interface ServiceAccount {
  service_account_id: string;
  member_id: string;
  name: string;
  role: Role;
  status: MemberStatus;
  created_at: string;
  updated_at: string;
}

export interface ApiKey {
  key_id: string;
  key_prefix: string;
  name: string;
  service_account_id: string;
  scopes: Scope[];
  created_at: string;
  revoked_at: string | null;
  /** The person who could have copied the key (its creator, or whoever minted the key it was made with); null: not recorded. */
  minted_by: { member_id: string; email: string | null } | null;
  /** The key this one was created with; null when a console session created it. */
  minted_with_key_id: string | null;
}

/** The create answer: the only time the plaintext key is shown. */
export interface CreatedApiKey extends ApiKey {
  api_key: string;
}

export interface Webhook {
  url: string;
  secret_prefix: string;
  disabled: boolean;
  disabled_reason: string | null;
  previous_secret_expires_at: string | null;
  created_at: string;
  updated_at: string;
}

/** PUT (create) and rotate: the only times the signing secret is shown. */
export interface WebhookWithSecret extends Webhook {
  secret: string;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'canceled';

export interface WebhookDelivery {
  delivery_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
  delivered_at: string | null;
  created_at: string;
  updated_at: string;
}

/** docs/console-api.md: what sign-up, sign-in, invite acceptance and GET /console/api/session answer. */
export interface Session {
  member: { member_id: string; email: string; name: string | null; role: Role };
  organization: { name: string; slug: string };
  csrf_token: string;
  expires_at: string;
}

/** docs/console-api.md: a sign-in without an organization whose email and password match in several. */
export interface OrganizationChoice {
  organizations: { name: string; slug: string }[];
}

export type InviteStatus = 'pending' | 'accepted' | 'expired' | 'revoked';

export interface InvitePreview {
  organization: { name: string; slug: string };
  role: Role;
  email: string | null;
  expires_at: string;
  status: InviteStatus;
}
