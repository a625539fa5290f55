/**
 * The contract between the gateway (issue: eval gateway) and metering (issue: eval metering). The gateway
 * makes exactly one `gate` call per eval; that one Redis round trip meters the eval, enforces the burst and
 * the monthly block, and returns the snapshot versions the gateway compares with what it has cached.
 */

/** Current versions of the documents an eval depends on; 0 when Redis has no such document (cold). */
export interface SnapshotVersions {
  catalog: number;
  subscriber: number;
  auth: number;
}

export type EvalWarn = '80' | '100' | 'grace';

/** Values for the X-Svc-Eval-* headers; null when the organization has no monthly cap. */
export interface EvalUsageHeaders {
  limit: number;
  used: number;
  warn: EvalWarn | null;
}

export type EvalGateResult =
  /** Counted: answer the eval (and `refund` if the answer turns out not to be 2xx). */
  | { outcome: 'counted'; versions: SnapshotVersions; usage: EvalUsageHeaders | null }
  /** Over the burst: 429 with Retry-After; not counted. */
  | { outcome: 'rate_limited'; versions: SnapshotVersions; retryAfterSeconds: number }
  /** Blocking arrangement past its grace period: 409 CONFLICT {field: 'evals', value: period}; not counted. */
  | { outcome: 'blocked'; versions: SnapshotVersions; period: string; usage: EvalUsageHeaders | null };

export interface EvalGateInput {
  organizationId: string;
  subscriberId: string;
  /** The application's clock (never Redis TIME), so tests control months and grace periods. */
  nowMs: number;
}

export interface EvalMeter {
  gate(input: EvalGateInput): Promise<EvalGateResult>;
  /**
   * Un-counts one eval that was counted by `gate` but did not end in a 2xx (404, 5xx). Pass the `nowMs` given
   * to that `gate` call, so the refund lands in the month that counted it.
   */
  refund(organizationId: string, nowMs: number): Promise<void>;
  /** Adds evals answered while Redis was unreachable (fail-open), once it is back. */
  addOfflineCount(organizationId: string, count: number, nowMs: number): Promise<void>;
}
