export { createApiClient, type ApiClient } from './api-client.ts';
export {
  EvalClient,
  type CheckAnswer,
  type CheckOptions,
  type ConsumeAnswer,
  type Entitlement,
  type EvalClientOptions,
  type FailMode,
  type FallbackValue,
  type ListAnswer,
  type MeteredCredit,
  type MeteredUse,
} from './eval-client.ts';
export {
  USAGE_BATCH_SIZE,
  type MeteredResult,
  type ReportAnswer,
  type SentUsageEvent,
  type UsageAmount,
  type UsageBatchAnswer,
  type UsageEventInput,
} from './usage-reports.ts';
export { EntitlementsError, type ErrorBody, type ErrorCode } from './errors.ts';
export type { EvalUsage, RetryOptions, TransportOptions } from './transport.ts';
export type { components, paths } from './generated/api.ts';
