import { withScripts } from '@ent/common/redis/commands';
import type { RedisClient } from '@ent/common/redis/connect';

/**
 * Raw replies; see each script's header. The batch reply is a header (status 0, limit, blocking, catalog
 * version, auth version, count before the batch, subscriber-write stamp, usage epoch) then one number per eval (its code, plus
 * 4 × (subscriber version + 1) when the script read that version), or `[3]` when Redis holds no arrangement,
 * `[4]` when the batch id already ran or was settled, or `[CALL_EXPIRED]`.
 */
/** A replayed metered answer's value is text: read that part as `unknown` (decodeOutcome). */
export type EvalGateBatchReply = [number, ...number[]];
export const GATE_REPLY_HEADER = 8;
/**
 * The whole reply of eval-gate-batch-8.lua and usage-apply-6.lua when Redis ran them past the deadline their last
 * argument named: nothing was changed, and the caller answers as for a call that timed out.
 */
export const CALL_EXPIRED = 6;
/** usage-apply-6.lua's whole reply when its call was settled before it ran: nothing was changed. */
export const CALL_SETTLED_BEFORE = 4;
export type EvalAdjustReply = [number, number];
/**
 * Code (0 settled now, 3 no arrangement, 5 settled before), count, delta applied, usage epoch (0 = none), consumes of
 * the batch given back now (the last two only with code 0).
 */
export type EvalSettleReply = [number, number, number, number, number, number];

export interface MeteringCommands {
  /**
   * Seven keys, seven arguments (the last: one trust flag per eval), the evals' subscriber ids, then their instants
   * as runs of (count, now), the metered operations if any, and last the deadline (eval-gate-batch-8.lua). An array
   * among them stands for its values (ioredis flattens one level when it makes the command); keys are never in one.
   */
  evalGateBatch(
    ...keysAndArgs: (string | number | readonly (string | number)[])[]
  ): Promise<EvalGateBatchReply>;
  evalAdjust(...keysAndArgs: (string | number)[]): Promise<EvalAdjustReply>;
  evalSettle(...keysAndArgs: (string | number)[]): Promise<EvalSettleReply>;
  /**
   * usage-apply-6.lua (its last two arguments the memory's time to live and the deadline): status, value per
   * operation, or `[CALL_EXPIRED]`, or `[CALL_SETTLED_BEFORE]`. An array among the arguments stands for its values.
   */
  usageApply(
    ...keysAndArgs: (string | number | readonly (string | number)[])[]
  ): Promise<(number | string)[]>;
  /** metered-refill-2.lua: the number of balances raised. */
  meteredRefill(...keysAndArgs: (string | number)[]): Promise<number>;
  /** metered-ready-2.lua: 1 when marked ready, 0 when Redis no longer holds the gathering's start. */
  meteredReady(...keysAndArgs: (string | number)[]): Promise<number>;
  /** usage-rate-2.lua: 0 when taken, else ms until the window closes. */
  usageRate(...keysAndArgs: (string | number)[]): Promise<number>;
}

export type MeteringRedis = RedisClient & MeteringCommands;

/** The metering scripts with their reply types (defined once per client by redis/commands.ts). */
export function withMeteringCommands(redis: RedisClient): MeteringRedis {
  return withScripts(redis) as unknown as MeteringRedis;
}
