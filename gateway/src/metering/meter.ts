import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';
import { publishArrangement, type Arrangement } from '@ent/common/metering/arrangement';
import {
  EvalGateUnavailableError,
  type EvalGateInput,
  type EvalGateResult,
  type EvalMeter,
  type SnapshotVersions,
} from './contract.ts';
import { GRACE_PERIOD_MS, periodOf, usageTtlMs } from '@ent/common/metering/period';
import { createGateBatcher, type GateBatch } from './gate-batcher.ts';
import { createRedisClock, type RedisClock } from './redis-clock.ts';
import {
  CALL_EXPIRED,
  GATE_REPLY_HEADER,
  withMeteringCommands,
  type EvalAdjustReply,
  type EvalGateBatchReply,
  type EvalSettleReply,
} from './scripts.ts';
import { createCallIds, createSettlements, GATE_BATCH_MEMORY_MS, type Settlement } from './settlements.ts';
import { headerWarn, type EvalUsageHeaders } from '@ent/common/metering/usage';
import {
  decodeOutcome,
  gateOperationArguments,
  giveBackArguments,
  type MeteredOperation,
  type MeteredOutcome,
} from './metered-operations.ts';

export interface EvalMeterOptions {
  redis: RedisClient;
  keys: RedisKeys;
  /** The arrangement from the source of truth, when Redis has none yet (new organization, flushed Redis). */
  loadArrangement: (organizationId: string) => Promise<Arrangement>;
  /** Redis's clock, for the deadline of a batch with metered operations (default: its own, measured on first use). */
  redisClock?: RedisClock;
}

/** Reply codes of eval-gate-batch-8.lua, eval-adjust-2.lua and eval-settle-4.lua. */
const GateCode = {
  Counted: 0,
  RateLimited: 1,
  Blocked: 2,
  NoArrangement: 3,
  AlreadyRan: 4,
  SettledBefore: 5,
  Expired: CALL_EXPIRED,
} as const;

export class MeteringError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MeteringError';
  }
}

function usageOf(
  cap: { evalLimit: number | null; blocking: boolean },
  used: number,
  stopped: boolean,
): EvalUsageHeaders | null {
  return cap.evalLimit === null
    ? null
    : { limit: cap.evalLimit, used, warn: headerWarn(cap, used, stopped), blocking: cap.blocking };
}

/**
 * The gate script's reply as each eval's result, in order (the one place its codes are read). An eval whose
 * version the script did not read gets the version its `verified` named: the script leaves it out only while the
 * stamp that version was verified at is still current.
 */
export function decodeGateReply(
  reply: EvalGateBatchReply,
  evals: readonly EvalGateInput[],
): EvalGateResult[] {
  const rawLimit = reply[1] ?? -1;
  const cap = { evalLimit: rawLimit < 0 ? null : rawLimit, blocking: reply[2] === 1 };
  const catalog = reply[3] ?? 0;
  const auth = reply[4] ?? 0;
  let count = reply[5] ?? 0;
  const subscriberStamp = reply[6] ?? 0;
  const results: EvalGateResult[] = new Array(evals.length);
  // The metered operations' pairs follow the evals' codes, in the evals' order.
  let meteredAt = GATE_REPLY_HEADER + evals.length;
  for (let i = 0; i < evals.length; i++) {
    const evalInput = evals[i]!;
    const encoded = reply[GATE_REPLY_HEADER + i];
    if (encoded === undefined) throw new MeteringError(`The eval gate reply holds no eval ${i}.`);
    const code = encoded % 4;
    let subscriber: number;
    if (encoded >= 4) subscriber = Math.floor(encoded / 4) - 1;
    else if (evalInput.verified) subscriber = evalInput.verified.verifiedVersion;
    else throw new MeteringError(`The eval gate reply left out the version of an unverified subscriber.`);
    const versions: SnapshotVersions = { catalog, subscriber, auth, subscriberStamp };
    switch (code) {
      case GateCode.Counted:
        count += 1;
        if (evalInput.metered === undefined) {
          results[i] = { outcome: 'counted', versions, usage: usageOf(cap, count, false) };
        } else {
          const metered: MeteredOutcome[] = [];
          for (const op of evalInput.metered) {
            const pairs = reply as readonly unknown[];
            metered.push(decodeOutcome(op, pairs[meteredAt], pairs[meteredAt + 1]));
            meteredAt += 2;
          }
          results[i] = { outcome: 'counted', versions, usage: usageOf(cap, count, false), metered };
        }
        break;
      case GateCode.RateLimited:
        results[i] = {
          outcome: 'rate_limited',
          versions,
          // The burst's rolling second is empty again a second after the newest admission's slot began.
          retryAfterSeconds: 1,
        };
        break;
      case GateCode.Blocked:
        results[i] = {
          outcome: 'blocked',
          versions,
          period: periodOf(evalInput.nowMs),
          usage: usageOf(cap, count, true),
        };
        break;
      default:
        throw new MeteringError(`Unexpected eval gate reply code ${code}.`);
    }
    if (code !== GateCode.Counted && evalInput.metered !== undefined)
      meteredAt += 2 * evalInput.metered.length;
  }
  return results;
}

/**
 * The gate script's arguments after its keys: the last stamp this meter saw, one trust flag per eval ('1': its
 * `verified` stamp is that stamp), the subscriber ids, and the instants as runs of (count, now): a batch's evals
 * mostly share a millisecond, and each argument costs Redis and the client a little. `withMetered`: some eval
 * carries a metered operation (the call then needs a deadline).
 */
export function gateArguments(
  evals: readonly EvalGateInput[],
  knownStamp: number,
  meteredKeys?: () => string[],
): { args: (string | number)[]; withMetered: boolean } {
  let trusted = '';
  let withMetered = false;
  const ids: string[] = new Array(evals.length);
  for (let i = 0; i < evals.length; i++) {
    const evalInput = evals[i]!;
    trusted += knownStamp !== 0 && evalInput.verified?.verifiedStamp === knownStamp ? '1' : '0';
    ids[i] = evalInput.subscriberId;
    if (evalInput.metered !== undefined) withMetered = true;
  }
  const args: (string | number)[] = [knownStamp === 0 ? '' : knownStamp, trusted, ...ids];
  for (let i = 0; i < evals.length;) {
    const nowMs = evals[i]!.nowMs;
    let end = i + 1;
    while (end < evals.length && evals[end]!.nowMs === nowMs) end++;
    args.push(end - i, nowMs);
    i = end;
  }
  if (withMetered && meteredKeys) {
    for (const value of meteredKeys()) args.push(value);
    for (const value of gateOperationArguments(evals)) args.push(value);
  }
  return { args, withMetered };
}

/**
 * A gate batch's metered operations in the order its arguments list them (gateOperationArguments), for the settle of
 * a failed call: its memory names the consumes it applied by their place in this list. Undefined: none.
 */
export function meteredOperationsOf(
  evals: readonly { metered?: readonly MeteredOperation[] | undefined }[],
): MeteredOperation[] | undefined {
  let operations: MeteredOperation[] | undefined;
  for (const evalInput of evals) {
    if (evalInput.metered === undefined) continue;
    operations ??= [];
    for (const op of evalInput.metered) operations.push(op);
  }
  return operations;
}

/** How often a probe asks a Redis that stopped answering whether it answers again. */
const UNRESPONSIVE_PROBE_INTERVAL_MS = 250;

/**
 * Opens on a timed-out command (the connection looks fine, the server does not answer: paused, swapped out,
 * busy in a long script, `CLIENT PAUSE`) and closes once a probe is answered. The probe is a script, as the gate
 * call is, so whatever holds one (`CLIENT PAUSE … WRITE` holds scripts, not PING) holds the other. While open,
 * evals fail open at once instead of each waiting out the command timeout: during a 10 s hang that is every warm
 * eval answered in a millisecond, not one in a second.
 */
function createUnresponsiveRedisBreaker(redis: Pick<RedisClient, 'eval' | 'status'>) {
  let isOpen = false;
  const probe = () => {
    // A client closed for good (the app shutting down) is not probed any more.
    if (redis.status === 'end') return;
    redis.eval('return 1', 0).then(
      () => {
        isOpen = false;
      },
      () => setTimeout(probe, UNRESPONSIVE_PROBE_INTERVAL_MS).unref(),
    );
  };
  return {
    open: () => isOpen,
    failed(error: unknown) {
      // ioredis's commandTimeout error; anything else (a script error, a refused connection) says nothing here.
      if (isOpen || (error as Error)?.message !== 'Command timed out') return;
      isOpen = true;
      probe();
    },
  };
}

/**
 * The eval meter of DESIGN.md §3: one atomic script call per eval (burst, monthly block, count, versions);
 * evals of one organization that arrive while its previous call is in flight share the next one (gate-batcher.ts).
 * The arrangement is read from Redis on every call; when it is missing it is loaded, published and the call
 * is retried once. A call that does not answer, and a refund Redis does not take, are settled exactly later
 * (settlements.ts), so the month's count stays the number of 2xx answers through Redis faults.
 */
export function createEvalMeter(options: EvalMeterOptions): EvalMeter {
  const redis = withMeteringCommands(options.redis);
  const { keys } = options;
  const newId = createCallIds();
  const unresponsive = createUnresponsiveRedisBreaker(redis);
  const redisClock = options.redisClock ?? createRedisClock(redis);
  const connected = () => redis.status === 'ready' && !unresponsive.open();

  async function withArrangement<T extends [number, ...number[]]>(
    organizationId: string,
    nowMs: number,
    run: () => Promise<T>,
  ): Promise<T> {
    const first = await run();
    if (first[0] !== GateCode.NoArrangement) return first;
    await publishArrangement(
      redis,
      keys,
      organizationId,
      await options.loadArrangement(organizationId),
      nowMs,
    );
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
    await withArrangement<EvalAdjustReply>(organizationId, nowMs, () =>
      redis.evalAdjust(
        keys.arrangement(organizationId),
        keys.evalUsage(organizationId, periodOf(nowMs)),
        delta,
        nowMs,
        usageTtlMs(nowMs),
      ),
    );
  };

  const settleOnce = async ({
    id,
    organizationId,
    nowMs,
    answered,
    operations,
  }: Settlement): Promise<void> => {
    if (!connected()) throw new MeteringError('Redis is not connected.');
    const reply = await withArrangement<EvalSettleReply>(organizationId, nowMs, () =>
      redis.evalSettle(
        keys.arrangement(organizationId),
        keys.evalUsage(organizationId, periodOf(nowMs)),
        keys.gateBatch(organizationId, id),
        keys.meteredDirty(organizationId),
        answered,
        nowMs,
        usageTtlMs(nowMs),
        GATE_BATCH_MEMORY_MS,
        keys.meteredBalance(organizationId, ''),
        keys.usageIdempotency(organizationId, ''),
        ...(operations ? giveBackArguments(operations) : []),
      ),
    );
    // Consumes given back are balance changes like any: the worker looks at organizations named here. A failed mark
    // leaves them in the organization's dirty set, which its next change names again (metered-balances.ts).
    // Only a fault of this gateway (fewer operations kept than the batch applied) leaves places unmatched: those consumes
    // stay applied although answered 503, so it is said loudly rather than counted silently.
    if ((reply[5] ?? 0) > 0)
      process.emitWarning(
        `settle of ${organizationId}/${id}: ${reply[5]} applied operation(s) had no operation sent to give back`,
        'MeteringSettleWarning',
      );
    if ((reply[4] ?? 0) > 0)
      await redis.sadd(keys.meteredDirtyOrganizations, organizationId).catch(() => undefined);
    if (answered === -1 && reply[0] === GateCode.Counted) {
      // A refund lowers this gateway's figure of the month (what a lost hash gets back) unless it went into a newer
      // hash than the figure came from: the figure is put back into that one whole, refunded eval included.
      const seen = seenUsage.get(organizationId);
      const sameHash = reply[3] === seen?.epoch || reply[2] === 0;
      if (seen && seen.period === periodOf(nowMs) && sameHash && seen.count > 0) seen.count -= 1;
    }
  };
  const settlements = createSettlements(settleOnce);

  /** The subscriber-write stamp of each organization's latest gate reply (none: Redis had no stamp). */
  const knownStamps = new Map<string, number>();
  /**
   * The month's usage epoch and count as each organization's latest reply showed them: passed on every call, so a
   * Redis that lost the month's count (restarted empty) gets back what it had reached (eval-gate-batch-8.lua).
   */
  const seenUsage = new Map<string, { period: string; epoch: number; count: number; callNumber: number }>();

  let callsSent = 0;
  /** The count after this reply's batch (its count before, plus the evals it counted), unless a later call's is known. */
  function rememberUsage(
    organizationId: string,
    period: string,
    reply: EvalGateBatchReply,
    evalCount: number,
    callNumber: number,
  ): void {
    const known = seenUsage.get(organizationId);
    // Two calls of one organization can be in flight at once: the later one's reply may arrive first.
    if (known && known.period === period && known.callNumber > callNumber) return;
    let count = reply[5] ?? 0;
    const end = GATE_REPLY_HEADER + evalCount;
    for (let i = GATE_REPLY_HEADER; i < end; i++) if (reply[i]! % 4 === GateCode.Counted) count += 1;
    seenUsage.set(organizationId, { period, epoch: reply[7] ?? 0, count, callNumber });
  }

  const runBatch = async (batch: GateBatch, batchId: string): Promise<EvalGateBatchReply> => {
    const { organizationId, evals } = batch;
    const { args: evalArguments, withMetered } = gateArguments(
      evals,
      knownStamps.get(organizationId) ?? 0,
      () => [
        keys.meteredBalance(organizationId, ''),
        keys.usageIdempotency(organizationId, ''),
        keys.meteredDirty(organizationId),
        keys.meteredReady(organizationId),
      ],
    );
    const seen = seenUsage.get(organizationId);
    const sameMonth = seen !== undefined && seen.period === batch.period;
    const callNumber = ++callsSent;
    const reply = await withArrangement<EvalGateBatchReply>(organizationId, evals[0]!.nowMs, async () => {
      // Taken as the call is sent (again for a retry): a batch Redis runs later than that applies nothing.
      let deadline: number | '' = '';
      if (withMetered) {
        const known = redisClock.deadline();
        deadline = typeof known === 'number' ? known : await known;
      }
      return redis.evalGateBatch(
        keys.arrangement(organizationId),
        keys.evalUsage(organizationId, batch.period),
        keys.burst(organizationId),
        keys.catalog(organizationId),
        keys.auth(organizationId),
        keys.gateBatch(organizationId, batchId),
        keys.subscriberVersions(organizationId),
        usageTtlMs(evals[0]!.nowMs),
        GRACE_PERIOD_MS,
        GATE_BATCH_MEMORY_MS,
        sameMonth ? seen.epoch : '',
        sameMonth ? seen.count : 0,
        // Handed over as one array, which ioredis flattens once when it makes the command: spread here, the batch's
        // arguments (most of them the metered operations') were copied three times more on the way.
        evalArguments,
        deadline,
      );
    });
    if (reply[0] === GateCode.AlreadyRan) throw new MeteringError(`Gate batch ${batchId} ran before.`);
    // Nothing of it was applied or remembered: a failed call like a timed-out one, settled as one that never ran.
    if (reply[0] === GateCode.Expired)
      throw new MeteringError(`Gate batch ${batchId} reached Redis after its deadline.`);
    const stamp = reply[6] ?? 0;
    if (stamp === 0) knownStamps.delete(organizationId);
    else knownStamps.set(organizationId, stamp);
    rememberUsage(organizationId, batch.period, reply, evals.length, callNumber);
    return reply;
  };

  const gateBatches = createGateBatcher(async (batch) => {
    const batchId = newId();
    // Not sent at all while disconnected: such a call certainly never ran, which its settlement can rely on.
    const sent = connected();
    try {
      if (!sent) throw new MeteringError('Redis is not connected or not answering.');
      return await runBatch(batch, batchId);
    } catch (error) {
      if (sent) unresponsive.failed(error);
      const report = settlements.failedCall(
        batchId,
        batch.organizationId,
        batch.evals[0]!.nowMs,
        batch.evals.length,
        sent,
        sent ? meteredOperationsOf(batch.evals) : undefined,
      );
      throw new EvalGateUnavailableError(
        `The eval gate call did not answer: ${(error as Error).message}`,
        report,
        {
          cause: error,
        },
      );
    }
  }, decodeGateReply);

  return {
    gate: (input: EvalGateInput): Promise<EvalGateResult> => gateBatches.add(input),

    async refund(organizationId, nowMs) {
      const refund: Settlement = { id: newId(), organizationId, nowMs, answered: -1 };
      try {
        await settleOnce(refund);
      } catch {
        settlements.owe(refund);
      }
    },

    addOfflineCount: (organizationId, count, nowMs) => adjust(organizationId, count, nowMs),

    settleLater(settlement) {
      settlements.owe(settlement);
      // At once rather than at the next tick of the settle timer: the sooner it is settled, the less a retry of the
      // call through another gateway can meet its records before they are taken back.
      if (connected()) settlements.settle().catch(() => undefined);
    },

    async settlePending() {
      if (settlements.pending() === 0 || !connected()) return;
      await settlements.settle();
    },

    pendingSettlements: () => settlements.pending(),
  };
}
