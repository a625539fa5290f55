import type { Migration } from 'kysely';
import * as createCore from './2026-11-22T1000_create_core.ts';
import * as createAudit from './2026-11-22T1100_create_audit.ts';
import * as webhookDeliveries from './2026-11-22T1200_webhook_deliveries.ts';
import * as outbox from './2026-11-23T1000_outbox.ts';
import * as consoleSessions from './2026-11-24T1000_console_sessions.ts';
import * as usageHistory from './2026-11-24T1100_usage_history.ts';
import * as listSearchIndexes from './2026-11-24T1110_list_search_indexes.ts';
import * as apiKeyMinters from './2026-11-26T2230_api_key_minters.ts';
import * as membersSignInEmail from './2026-11-26T2300_members_sign_in_email.ts';
import * as meteredFeatures from './2026-11-27T0100_metered_features.ts';
import * as usageEventsRate from './2026-11-27T0200_usage_events_rate.ts';
import * as usageThresholds from './2026-11-27T0210_usage_thresholds.ts';
import * as idempotencyKeys from './2026-11-27T0300_idempotency_keys.ts';
import * as credits from './2026-11-27T0420_credits.ts';
import * as imports from './2026-11-27T0500_imports.ts';
import * as meteredUsageCredits from './2026-11-27T0700_metered_usage_credits.ts';
import * as outboxSubscriberBatches from './2026-11-27T1100_outbox_subscriber_batches.ts';
import * as meteredUsageFillfactor from './2026-11-27T1500_metered_usage_fillfactor.ts';
import * as creditsFillfactor from './2026-11-27T1700_credits_fillfactor.ts';
import * as creditSpentInBalances from './2026-11-27T2000_credit_spent_in_balances.ts';

/** Every migration, by sortable name. Add new files here; never edit a shipped one. */
export const migrations: Record<string, Migration> = {
  '2026-11-22T1000_create_core': createCore,
  '2026-11-22T1100_create_audit': createAudit,
  '2026-11-22T1200_webhook_deliveries': webhookDeliveries,
  '2026-11-23T1000_outbox': outbox,
  '2026-11-24T1000_console_sessions': consoleSessions,
  '2026-11-24T1100_usage_history': usageHistory,
  '2026-11-24T1110_list_search_indexes': listSearchIndexes,
  '2026-11-26T2230_api_key_minters': apiKeyMinters,
  '2026-11-26T2300_members_sign_in_email': membersSignInEmail,
  '2026-11-27T0100_metered_features': meteredFeatures,
  '2026-11-27T0200_usage_events_rate': usageEventsRate,
  '2026-11-27T0210_usage_thresholds': usageThresholds,
  '2026-11-27T0300_idempotency_keys': idempotencyKeys,
  '2026-11-27T0420_credits': credits,
  '2026-11-27T0500_imports': imports,
  '2026-11-27T0700_metered_usage_credits': meteredUsageCredits,
  '2026-11-27T1100_outbox_subscriber_batches': outboxSubscriberBatches,
  '2026-11-27T1500_metered_usage_fillfactor': meteredUsageFillfactor,
  '2026-11-27T1700_credits_fillfactor': creditsFillfactor,
  '2026-11-27T2000_credit_spent_in_balances': creditSpentInBalances,
};
