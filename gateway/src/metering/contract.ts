import type { EvalUsageHeaders } from '@ent/common/metering/usage';
import type { MeteredOperation, MeteredOutcome } from './metered-operations.ts';
import type { Settlement } from './settlements.ts';

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
  /**
   * The organization's subscriber-write stamp when `subscriber` was current (0: Redis has none). A cached entry
   * that matched `subscriber` is verified at it: passed back as the eval's `verified`, it spares Redis reading
   * the subscriber's version again until some subscriber of the organization changes.
   */
  subscriberStamp: number;
}

/**
 * A subscriber version an earlier gate reply gave, and the subscriber-write stamp it was current at (0: never
 * verified). A cached entry can be one itself: nothing is allocated per eval to pass it.
 */
export interface VerifiedSubscriber {
  readonly verifiedVersion: number;
  readonly verifiedStamp: number;
}

export type EvalGateResult =
  /** Counted: answer the eval (and `refund` if the answer turns out not to be 2xx). */
  | {
      outcome: 'counted';
      versions: SnapshotVersions;
      usage: EvalUsageHeaders | null;
      /** The outcome of each of the eval's metered operations, in order (absent when it carried none). */
      metered?: MeteredOutcome[];
    }
  /** Over the burst: 429 with Retry-After; not counted. */
  | { outcome: 'rate_limited'; versions: SnapshotVersions; retryAfterSeconds: number }
  /** Blocking arrangement past its grace period: 409 CONFLICT {field: 'evals', value: period}; not counted. */
  | { outcome: 'blocked'; versions: SnapshotVersions; period: string; usage: EvalUsageHeaders | null };

export interface EvalGateInput {
  organizationId: string;
  subscriberId: string;
  /** The application's clock (never Redis TIME), so tests control months and grace periods. */
  nowMs: number;
  /**
   * What the caller's cache holds for the subscriber, as verified by an earlier reply. While the organization's
   * stamp has not moved since, the result's subscriber version is its `verifiedVersion`, without Redis reading it.
   */
  verified?: VerifiedSubscriber | undefined;
  /**
   * Metered reads and consumes resolved from the cached snapshot, applied in the same call when its versions are
   * still current (absent for a plain eval, which then pays nothing for them).
   */
  metered?: readonly MeteredOperation[] | undefined;
}

/**
 * A gate call that did not answer (Redis unreachable, timed out, or the reply lost): it may or may not have
 * run. Every eval of it must `report` exactly once whether it was answered 2xx (fail open); the meter then
 * settles the call exactly once Redis is back (see settlements.ts).
 */
export class EvalGateUnavailableError extends Error {
  constructor(
    message: string,
    readonly report: (answered2xx: boolean) => void,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'EvalGateUnavailableError';
  }
}

export interface EvalMeter {
  /** Rejects with EvalGateUnavailableError when the call did not answer (the caller reports each eval). */
  gate(input: EvalGateInput): Promise<EvalGateResult>;
  /**
   * Un-counts one eval that was counted by `gate` but did not end in a 2xx (404, 5xx). Pass the `nowMs` given
   * to that `gate` call, so the refund lands in the month that counted it. A refund Redis does not take now
   * is kept and applied once by `settlePending`.
   */
  refund(organizationId: string, nowMs: number): Promise<void>;
  /** Adds evals counted elsewhere (tools, tests); not idempotent, the gateway never uses it. */
  addOfflineCount(organizationId: string, count: number, nowMs: number): Promise<void>;
  /**
   * Settles a call once, later, through the same settlements as failed gate calls: a usage call that failed on this
   * side (it may have run) is settled with 0 answered, which gives back what its memory lists (eval-settle-4.lua).
   */
  settleLater(settlement: Settlement): void;
  /** Applies, once each, what failed gate calls and refunds still owe Redis; a no-op while it is unreachable. */
  settlePending(): Promise<void>;
  /** Failed gate calls and refunds not yet settled. */
  pendingSettlements(): number;
}
