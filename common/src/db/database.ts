import type { ColumnType, Generated, Selectable } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type CreatedAt = ColumnType<Date, Date | string | undefined, never>;

export type FeatureKind = 'flag' | 'limit' | 'metered';
export type MeteredReset = 'day' | 'week' | 'month' | 'year' | 'never';
export type MeteredResetAnchor = 'calendar' | 'subscription';
export type PlanKind = 'catalog' | 'custom';
export type MemberStatus = 'active' | 'suspended' | 'removed';
export type SubscriptionStatus = 'active' | 'canceled';

export interface OrganizationsTable {
  id: string;
  name: string;
  slug: string;
  /** Allotment key reported by usage (`free` for self-serve); null when no allotment applies. */
  eval_plan: string | null;
  /** Evals included per UTC month; null = unlimited (never gated). */
  eval_limit: ColumnType<number | null, number | null | undefined, number | null>;
  eval_blocking: ColumnType<boolean, boolean | undefined, boolean>;
  /** Eval requests per second before 429. */
  eval_burst: ColumnType<number, number | undefined, number>;
  /** Metered usage events (reports, batch events) per second before 429. */
  usage_events_per_second: ColumnType<number, number | undefined, number>;
  /** Bumped in the same transaction as every catalog write; snapshots never go back to an older one. */
  catalog_version: ColumnType<number, number | undefined, number>;
  /** Bumped whenever a key, member or role change may alter who is let in. */
  auth_version: ColumnType<number, number | undefined, number>;
  /** Bumped with every change of the eval arrangement (limit, blocking, burst, plan). */
  arrangement_version: ColumnType<number, number | undefined, number>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface MembersTable {
  id: string;
  organization_id: string;
  kind: 'user' | 'service_account';
  email: string | null;
  name: string | null;
  role: string;
  status: ColumnType<MemberStatus, MemberStatus | undefined, MemberStatus>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface ServiceAccountsTable {
  id: string;
  organization_id: string;
  member_id: string;
  name: string;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface ApiKeysTable {
  id: string;
  organization_id: string;
  service_account_id: string;
  name: string;
  key_prefix: string;
  key_hash: string;
  /** Empty = full access. */
  scopes: string[];
  created_at: CreatedAt;
  revoked_at: Date | null;
  last_used_at: Date | null;
  /**
   * The person who could have copied the key: the console session's member that created it, or the
   * `minted_by_member_id` of the key that created it. Null: created before minters were recorded, or by provisioning.
   */
  minted_by_member_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** The key that created this one; null when a console session (or provisioning) did. */
  minted_with_key_id: ColumnType<string | null, string | null | undefined, string | null>;
}

/** A console user's password: `scrypt$N$r$p$salt$hash` (base64 salt and hash), never the password itself. */
export interface MemberPasswordsTable {
  member_id: string;
  organization_id: string;
  password_hash: string;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

/** A console session: found by the SHA-256 of its cookie token; its CSRF token is kept hashed too. */
export interface ConsoleSessionsTable {
  id: string;
  organization_id: string;
  member_id: string;
  token_hash: string;
  /** `ses_` and the first 8 secret characters: what the audit log shows as actor.key_prefix. */
  token_prefix: string;
  csrf_hash: string;
  created_at: CreatedAt;
  expires_at: Date;
  revoked_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface FeaturesTable {
  id: string;
  organization_id: string;
  key: string;
  name: string;
  description: ColumnType<string, string | undefined, string>;
  kind: FeatureKind;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface PlansTable {
  id: string;
  organization_id: string;
  key: string;
  name: string;
  kind: PlanKind;
  archived_at: Date | null;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface PlanGrantsTable {
  plan_id: string;
  feature_id: string;
  feature_kind: FeatureKind;
  /** For limit and metered grants: null = unlimited. Always null for flags. */
  limit_value: number | null;
  /** Metered grants only (null for the other kinds). */
  reset: MeteredReset | null;
  reset_anchor: MeteredResetAnchor | null;
  soft: boolean | null;
  /** A metered grant's rollover max (issue 35); null = no rollover, and always null for the other kinds. */
  rollover_max: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface SubscribersTable {
  organization_id: string;
  subscriber_id: string;
  name: string | null;
  /** Bumped in the same transaction as every write to the subscriber, its subscriptions or overrides. */
  version: ColumnType<number, number | undefined, number>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface SubscriptionsTable {
  id: string;
  organization_id: string;
  subscriber_id: string;
  plan_id: string;
  status: ColumnType<SubscriptionStatus, SubscriptionStatus | undefined, SubscriptionStatus>;
  created_at: CreatedAt;
  canceled_at: Date | null;
  updated_at: Timestamp;
  /** Where its subscription-anchored metered periods start: its creation, or the anchor of the one it replaced. */
  anchored_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

/** The durable copy of one metered balance (subscriber, feature, period), written by the worker from Redis. */
export interface MeteredUsageTable {
  organization_id: string;
  subscriber_id: string;
  feature_key: string;
  period_start: Date;
  /** null for reset "never". */
  period_end: Date | null;
  used: ColumnType<number, number, number>;
  revision: ColumnType<number, number, number>;
  /** What credits covered of `used` (the balance hash's `k`, issue 35). */
  covered: ColumnType<number, number | undefined, number>;
  /** The period's rollover amount (the balance hash's `ro`). */
  rollover: ColumnType<number, number | undefined, number>;
  /**
   * The subscriber's credit-spent figures for this feature (credit id -> spent) read with this balance by the drain
   * that wrote it, and that drain's transaction id; null when the balance met no credits. Read through
   * `credit_spent_now(credits)`, never alone.
   */
  credit_spent: ColumnType<Record<string, number> | null, string | null | undefined, string | null>;
  credit_spent_seq: ColumnType<number | null, number | null | undefined, number | null>;
  updated_at: Timestamp;
}

/** A usage threshold a balance reached, once per subscriber, feature, period and threshold (its webhook's dedup). */
export interface UsageThresholdsReachedTable {
  organization_id: string;
  subscriber_id: string;
  feature_key: string;
  period_start: Date;
  threshold: 80 | 100;
  used: ColumnType<number, number, number>;
  limit_value: ColumnType<number, number, number>;
  reached_at: Timestamp;
}

/** A reserved Idempotency-Key (admin writes); the response columns are null until the response is recorded. */
export interface IdempotencyKeysTable {
  organization_id: string;
  key: string;
  fingerprint: string;
  response_status: number | null;
  response_content_type: string | null;
  response_body: string | null;
  created_at: Timestamp;
  expires_at: Date;
}

export interface OverridesTable {
  id: string;
  organization_id: string;
  subscriber_id: string;
  feature_id: string;
  feature_kind: FeatureKind;
  allowed: boolean | null;
  limit_value: number | null;
  expires_at: Date | null;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export type CreditSource = 'manual' | 'rollover';

/** A credit on one subscriber's metered feature (DESIGN.md §5, "Credits"). */
export interface CreditsTable {
  id: string;
  organization_id: string;
  subscriber_id: string;
  feature_id: string;
  name: string | null;
  amount: ColumnType<number, number, never>;
  /**
   * Spent as last written to the credit itself (created, imported, or a drain of its hash alone), at `spent_seq`; what
   * it has spent is `credit_spent_now(credits)`, the latest of this and its balances' rows (decisions.md).
   */
  spent: ColumnType<number, number | undefined, number>;
  spent_seq: ColumnType<number, number | undefined, number>;
  priority: ColumnType<number, number, never>;
  effective_at: ColumnType<Date, Date, never>;
  expires_at: ColumnType<Date | null, Date | null, never>;
  source: ColumnType<CreditSource, CreditSource, never>;
  /** Rollover credits: the period whose unused allowance it is. */
  source_period_start: ColumnType<Date | null, Date | null | undefined, never>;
  voided_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** When credit.expired was raised; null until then. */
  expired_event_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface InvitesTable {
  id: string;
  organization_id: string;
  role: string;
  email: string | null;
  token_hash: string;
  /** The token encrypted with the secrets key: the invite list shows live links. */
  token_ciphertext: string | null;
  created_by_member_id: string | null;
  expires_at: Date;
  accepted_at: Date | null;
  revoked_at: Date | null;
  created_at: CreatedAt;
}

export interface WebhooksTable {
  organization_id: string;
  url: string;
  secret_ciphertext: string;
  secret_prefix: string;
  previous_secret_ciphertext: string | null;
  previous_secret_expires_at: Date | null;
  disabled: ColumnType<boolean, boolean | undefined, boolean>;
  /** Why delivery stopped on its own (the endpoint answered 410); null when enabled or disabled by hand. */
  disabled_reason: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export type WebhookDeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'canceled';

export interface WebhookDeliveriesTable {
  id: string;
  organization_id: string;
  event_id: string;
  event_type: string;
  /** The exact JSON body that is signed and sent. */
  payload: string;
  status: ColumnType<WebhookDeliveryStatus, WebhookDeliveryStatus | undefined, WebhookDeliveryStatus>;
  attempts: ColumnType<number, number | undefined, number>;
  last_status_code: ColumnType<number | null, number | null | undefined, number | null>;
  last_error: ColumnType<string | null, string | null | undefined, string | null>;
  next_attempt_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  delivered_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

/** `subscribers`: one entry for an import batch's subscribers (named in `subjects`), not one `subscriber` row each. */
export type OutboxKind = 'catalog' | 'subscriber' | 'subscribers' | 'auth' | 'arrangement';

/**
 * What a committed write must cause in Redis, recorded in the write's own transaction: the relay republishes
 * every row not yet `done_at` (the inline write-through after the commit is only the fast path).
 */
export interface OutboxTable {
  id: Generated<number>;
  organization_id: string;
  kind: OutboxKind;
  /** The subscriber id for `subscriber` rows; null otherwise. */
  subject: string | null;
  /** The subscriber ids of a `subscribers` row; null otherwise. */
  subjects: ColumnType<string[] | null, string[] | null | undefined, string[] | null>;
  /** The Postgres version the write produced (the snapshot that covers it has version + 1); 0 on `subscribers`. */
  version: number;
  created_at: CreatedAt;
  attempts: ColumnType<number, number | undefined, number>;
  next_attempt_at: ColumnType<Date, Date | string | undefined, Date | string>;
  last_error: ColumnType<string | null, string | null | undefined, string | null>;
  done_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

export type AuditOutcomeKind = 'rejected' | 'responded' | 'no_response';

/** An audit entry as first recorded (`pending`); append-only: never updated or deleted. */
export interface AuditEventsTable {
  id: string;
  organization_id: string;
  occurred_at: Date;
  request_id: string;
  actor_member_id: string;
  actor_auth_type: 'member_apikey' | 'member_session';
  actor_key_prefix: string;
  service: 'api' | 'identity';
  method: string;
  route: string;
  params: ColumnType<Record<string, string>, string, never>;
  ip: string;
  user_agent: string | null;
  recorded_at: CreatedAt;
}

/** The outcome appended to an entry (at most one per entry); append-only. */
export interface AuditOutcomesTable {
  event_id: string;
  organization_id: string;
  outcome: AuditOutcomeKind;
  /** Set exactly when the outcome is `responded`. */
  status: number | null;
  details: ColumnType<Record<string, unknown> | null, string | null, never>;
  recorded_at: CreatedAt;
}

/** Progress of the audit-settle job: every entry that occurred before the latest mark has an outcome. */
export interface AuditSettleMarksTable {
  settled_before: Date;
  recorded_at: CreatedAt;
}

/**
 * One organization's eval count on one UTC day, sampled from Redis by the usage-history job: the month's
 * cumulative count as last seen that day (only ever raised) and the allotment then.
 */
export interface UsageDaysTable {
  organization_id: string;
  /** A UTC day; written as `YYYY-MM-DD` and read back with to_char (pg would make a local-midnight Date). */
  day: ColumnType<string, string, string>;
  /** `YYYY-MM`, the UTC month of `day`. */
  period: string;
  count: number;
  /** Evals included then; null = unlimited. */
  eval_limit: number | null;
  updated_at: Timestamp;
}

export type ImportStatusColumn = 'receiving' | 'running' | 'succeeded' | 'failed';
export type ImportLineResult = 'pending' | 'applied' | 'unchanged' | 'failed';

/** A bulk import (DESIGN.md §5): its body staged in import_lines, applied in batches under a lease. */
export interface ImportsTable {
  id: string;
  organization_id: string;
  member_id: string;
  /** The POST's request id: what each line's error body names. */
  request_id: string;
  status: ImportStatusColumn;
  dry_run: boolean;
  lines: ColumnType<number, number | undefined, number>;
  applied: ColumnType<number, number | undefined, number>;
  unchanged: ColumnType<number, number | undefined, number>;
  failed: ColumnType<number, number | undefined, number>;
  /** Every line at or below it has its result committed. */
  applied_through: ColumnType<number, number | undefined, number>;
  sha256: string | null;
  /** Why a `failed` import stopped. */
  failure: string | null;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  created_at: CreatedAt;
  finished_at: Date | null;
}

export interface ImportLinesTable {
  import_id: string;
  line: number;
  type: string | null;
  key: string | null;
  /** The validated record until its batch is applied. */
  record: ColumnType<Record<string, unknown> | null, string | null, string | null>;
  result: ImportLineResult;
  error: ColumnType<Record<string, unknown> | null, string | null, string | null>;
}

export interface Database {
  imports: ImportsTable;
  import_lines: ImportLinesTable;
  organizations: OrganizationsTable;
  members: MembersTable;
  service_accounts: ServiceAccountsTable;
  api_keys: ApiKeysTable;
  member_passwords: MemberPasswordsTable;
  console_sessions: ConsoleSessionsTable;
  features: FeaturesTable;
  plans: PlansTable;
  plan_grants: PlanGrantsTable;
  subscribers: SubscribersTable;
  subscriptions: SubscriptionsTable;
  metered_usage: MeteredUsageTable;
  usage_thresholds_reached: UsageThresholdsReachedTable;
  idempotency_keys: IdempotencyKeysTable;
  overrides: OverridesTable;
  credits: CreditsTable;
  invites: InvitesTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  outbox: OutboxTable;
  audit_events: AuditEventsTable;
  audit_outcomes: AuditOutcomesTable;
  audit_settle_marks: AuditSettleMarksTable;
  usage_days: UsageDaysTable;
}

export type Organization = Selectable<OrganizationsTable>;
export type Feature = Selectable<FeaturesTable>;
export type Plan = Selectable<PlansTable>;
export type Subscriber = Selectable<SubscribersTable>;
export type Subscription = Selectable<SubscriptionsTable>;
export type Override = Selectable<OverridesTable>;
export type Credit = Selectable<CreditsTable>;
export type ApiKey = Selectable<ApiKeysTable>;
export type Member = Selectable<MembersTable>;
export type ConsoleSession = Selectable<ConsoleSessionsTable>;
export type Invite = Selectable<InvitesTable>;
export type Webhook = Selectable<WebhooksTable>;
export type WebhookDelivery = Selectable<WebhookDeliveriesTable>;
