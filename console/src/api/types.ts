/**
 * The shapes the console reads and sends: the contract's types (`@ent/contract`), the same TypeBox schemas that
 * validate each route and make /openapi.json. Type-only imports, so no schema code enters the bundle; the role
 * and scope lists are plain constants. console/test/contract.test.ts checks that each route the console calls
 * still serves these schemas.
 */
import type { ApiKeyBody, CreatedApiKeyBody } from '@ent/contract/api-keys';
import type { AuditEventBody } from '@ent/contract/audit';
import type {
  ConsoleSessionBody,
  InvitePreviewBody,
  InviteStatus as ContractInviteStatus,
  OrganizationChoiceBody,
} from '@ent/contract/console';
import type { EntitlementList as ContractEntitlementList, MeteredCheckResult } from '@ent/contract/evals';
import type { FeatureBody } from '@ent/contract/features';
import type { CreditBody, CreditStatus as ContractCreditStatus } from '@ent/contract/credits';
import type { InviteBody } from '@ent/contract/invites';
import type { MemberBody } from '@ent/contract/members';
import type {
  SubscriberUsage as ContractSubscriberUsage,
  UsagePeriodBody,
} from '@ent/contract/metered-usage';
import type { OrganizationBody } from '@ent/contract/organization';
import type { OverrideBody } from '@ent/contract/overrides';
import type { GrantBody, MeteredReset, MeteredResetAnchor, PlanBody } from '@ent/contract/plans';
import type { ServiceAccountBody } from '@ent/contract/service-accounts';
import type { SubscriberBody } from '@ent/contract/subscribers';
import type { ChangedSubscriptionBody, SubscriptionBody } from '@ent/contract/subscriptions';
import type { UsageHistoryBody, UsageMonthBody, UsageRecordBody } from '@ent/contract/usage';
import type {
  ConsoleWebhookBody,
  WebhookBody,
  WebhookDeliveryBody,
  WebhookWithSecretBody,
} from '@ent/contract/webhook';

export { ROLES, ROLE_RANK, type Role, type Scope } from '@ent/contract/scopes';

export interface Page {
  has_more: boolean;
}

export type Feature = FeatureBody;
export type FeatureKind = Feature['kind'];

export type Grant = GrantBody;
export type { MeteredReset, MeteredResetAnchor };
export type Plan = PlanBody;
export type PlanKind = Plan['kind'];

export type Subscriber = SubscriberBody;
export type Subscription = SubscriptionBody;
export type ChangedSubscription = ChangedSubscriptionBody;
export type Override = OverrideBody;

export type EntitlementList = ContractEntitlementList;
export type Entitlement = EntitlementList['entitlements'][number];

/** DESIGN.md §5: a metered feature's current period (GET /org/subscribers/{id}/usage). */
export type MeteredUsage = MeteredCheckResult;
export type SubscriberUsage = ContractSubscriberUsage;
/** A metered feature's ended period with its final figure (GET .../usage/{feature}/periods). */
export type UsagePeriod = UsagePeriodBody;

/** A credit on a metered feature (DESIGN.md §5 "Credits"; GET /org/subscribers/{id}/credits). */
export type Credit = CreditBody;
export type CreditStatus = ContractCreditStatus;

export type UsageRecord = UsageRecordBody;
/** One UTC month of GET /org/usage/history: `days` are cumulative counts, oldest first. */
export type UsageMonth = UsageMonthBody;
export type UsageHistory = UsageHistoryBody;

export type AuditEvent = AuditEventBody;

export type Member = MemberBody;
export type MemberStatus = Member['status'];
export type Invite = InviteBody;
export type ServiceAccount = ServiceAccountBody;
export type ApiKey = ApiKeyBody;
/** The create answer: the only time the plaintext key is shown. */
export type CreatedApiKey = CreatedApiKeyBody;

export type Organization = OrganizationBody;

export type Webhook = WebhookBody;
export type ConsoleWebhook = ConsoleWebhookBody;
/** PUT (create) and rotate: the only times the signing secret is shown. */
export type WebhookWithSecret = WebhookWithSecretBody;
export type WebhookDelivery = WebhookDeliveryBody;
export type DeliveryStatus = WebhookDelivery['status'];

/** docs/console-api.md: what sign-up, sign-in, invite acceptance and GET /console/api/session answer. */
export type Session = ConsoleSessionBody;
/** docs/console-api.md: a sign-in without an organization whose email and password match in several. */
export type OrganizationChoice = OrganizationChoiceBody;
export type InviteStatus = ContractInviteStatus;
export type InvitePreview = InvitePreviewBody;
