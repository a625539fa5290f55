import type { RedisClient } from '../redis/connect.ts';
import type { RedisKeys } from '../redis/keys.ts';
import { publishArrangement, type Arrangement } from './arrangement.ts';
import type {
  EvalGateInput,
  EvalGateResult,
  EvalMeter,
  EvalUsageHeaders,
  SnapshotVersions,
} from './contract.ts';
import { GRACE_PERIOD_MS, periodOf, usageTtlMs } from './period.ts';
import { createGateBatcher } from './gate-batcher.ts';
import {
  GATE_REPLY_HEADER,
  GATE_REPLY_WIDTH,
  withMeteringCommands,
  type EvalAdjustReply,
  type EvalGateBatchReply,
} from './scripts.ts';
import { headerWarn } from './usage.ts';

export interface EvalMeterOptions {
  redis: RedisClient;
  keys: RedisKeys;
  /** The arrangement from the source of truth, when Redis has none yet (new organization, flushed Redis). */
  loadArrangement: (organizationId: string) => Promise<Arrangement>;
}

/** Reply codes of eval-gate-batch.lua and eval-adjust-2.lua. */
const GateCode = { Counted: 0, RateLimited: 1, Blocked: 2, NoArrangement: 3 } as const;

export class MeteringError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MeteringError';
  }
}

/** Maps eval `index` of the gate script's reply to the contract's result (the one place its codes are read). */
export function toGateResult(reply: EvalGateBatchReply, index: number, nowMs: number): EvalGateResult {
  const [, rawLimit = -1, blocking, catalog = 0, auth = 0] = reply;
  const at = GATE_REPLY_HEADER + index * GATE_REPLY_WIDTH;
  const code = reply[at];
  const count = reply[at + 1] ?? 0;
  const versions: SnapshotVersions = { catalog, subscriber: reply[at + 2] ?? 0, auth };
  const cap = { evalLimit: rawLimit < 0 ? null : rawLimit, blocking: blocking === 1 };
  const usage = (used: number, stopped: boolean): EvalUsageHeaders | null =>
    cap.evalLimit === null ? null : { limit: cap.evalLimit, used, warn: headerWarn(cap, used, stopped) };
  switch (code) {
    case GateCode.Counted:
      return { outcome: 'counted', versions, usage: usage(count, false) };
    case GateCode.RateLimited:
      return {
        outcome: 'rate_limited',
        versions,
        retryAfterSeconds: Math.max(1, Math.ceil((1000 - (nowMs % 1000)) / 1000)),
      };
    case GateCode.Blocked:
      return { outcome: 'blocked', versions, period: periodOf(nowMs), usage: usage(count, true) };
    default:
      throw new MeteringError(`Unexpected eval gate reply code ${code}.`);
  }
}

/**
 * The eval meter of DESIGN.md §3: one atomic script call per eval (burst, monthly block, count, versions);
 * evals of one organization that arrive while its previous call is in flight share the next one (gate-batcher.ts).
 * The arrangement is read from Redis on every call; when it is missing it is loaded, published and the call
 * is retried once.
 */
export function createEvalMeter(options: EvalMeterOptions): EvalMeter {
  const redis = withMeteringCommands(options.redis);
  const { keys } = options;

  async function withArrangement<T extends [number, ...number[]]>(
    organizationId: string,
    run: () => Promise<T>,
  ): Promise<T> {
    const first = await run();
    if (first[0] !== GateCode.NoArrangement) return first;
    await publishArrangement(redis, keys, organizationId, await options.loadArrangement(organizationId));
    const second = await run();
    if (second[0] === GateCode.NoArrangement) {
      throw new MeteringError(`The eval arrangement of ${organizationId} could not be published to Redis.`);
    }
    return second;
  }

  const adjust = async (organizationId: string, delta: number, nowMs: number): Promise<void> => {
    if (!Number.isInteger(delta))
      throw new MeteringError(`Eval count adjustments are integers, got ${delta}.`);
    if (delta === 0) return;
    await withArrangement<EvalAdjustReply>(organizationId, () =>
      redis.evalAdjust(
        keys.arrangement(organizationId),
        keys.evalUsage(organizationId, periodOf(nowMs)),
        delta,
        nowMs,
        usageTtlMs(nowMs),
      ),
    );
  };

  const gateBatches = createGateBatcher((batch) =>
    withArrangement<EvalGateBatchReply>(batch.organizationId, () =>
      redis.evalGateBatch(
        5 + batch.evals.length,
        keys.arrangement(batch.organizationId),
        keys.evalUsage(batch.organizationId, batch.period),
        keys.burst(batch.organizationId),
        keys.catalog(batch.organizationId),
        keys.auth(batch.organizationId),
        ...batch.evals.map((e) => keys.subscriber(batch.organizationId, e.subscriberId)),
        usageTtlMs(batch.evals[0]!.nowMs),
        GRACE_PERIOD_MS,
        ...batch.evals.map((e) => e.nowMs),
      ),
    ),
    toGateResult,
  );

  return {
    gate: (input: EvalGateInput): Promise<EvalGateResult> => gateBatches.add(input),

    refund: (organizationId, nowMs) => adjust(organizationId, -1, nowMs),

    addOfflineCount: (organizationId, count, nowMs) => adjust(organizationId, count, nowMs),
  };
}
