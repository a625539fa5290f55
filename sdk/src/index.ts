export { createApiClient, type ApiClient } from './api-client.ts';
export {
  EvalClient,
  type CheckAnswer,
  type Entitlement,
  type EvalClientOptions,
  type FailMode,
  type FallbackValue,
  type ListAnswer,
} from './eval-client.ts';
export { EntitlementsError, type ErrorBody, type ErrorCode } from './errors.ts';
export type { EvalUsage, RetryOptions, TransportOptions } from './transport.ts';
export type { components, paths } from './generated/api.ts';
