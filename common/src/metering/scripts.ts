import { withScripts } from '../redis/commands.ts';
import type { RedisClient } from '../redis/connect.ts';

/**
 * Raw replies; see each script's header. The batch reply is a header (status 0, limit, blocking, catalog
 * version, auth version) then GATE_REPLY_WIDTH numbers per eval (code, count, subscriber version), or `[3]`
 * when Redis holds no arrangement, or `[4]` when the batch id already ran or was settled.
 */
export type EvalGateBatchReply = [number, ...number[]];
export const GATE_REPLY_HEADER = 5;
export const GATE_REPLY_WIDTH = 3;
export type EvalAdjustReply = [number, number];
/** Code (0 settled now, 3 no arrangement, 5 settled before), count, delta applied. */
export type EvalSettleReply = [number, number, number];

export interface MeteringCommands {
  /** Seven keys, three arguments, then the evals' subscriber ids and then their instants (eval-gate-batch-7.lua). */
  evalGateBatch(...keysAndArgs: (string | number)[]): Promise<EvalGateBatchReply>;
  evalAdjust(...keysAndArgs: (string | number)[]): Promise<EvalAdjustReply>;
  evalSettle(...keysAndArgs: (string | number)[]): Promise<EvalSettleReply>;
}

export type MeteringRedis = RedisClient & MeteringCommands;

/** The metering scripts with their reply types (defined once per client by redis/commands.ts). */
export function withMeteringCommands(redis: RedisClient): MeteringRedis {
  return withScripts(redis) as unknown as MeteringRedis;
}
