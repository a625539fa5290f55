import { readFileSync } from 'node:fs';
import type { RedisClient } from '../redis/connect.ts';

const lua = (name: string) => readFileSync(new URL(`../redis/lua/${name}`, import.meta.url), 'utf8');

const EVAL_GATE_BATCH = lua('eval-gate-batch.lua');
const EVAL_ADJUST = lua('eval-adjust-2.lua');
const EVAL_SETTLE = lua('eval-settle-3.lua');

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
  /** First argument: the number of keys (6 + evals). */
  evalGateBatch(...numKeysKeysAndArgs: (string | number)[]): Promise<EvalGateBatchReply>;
  evalAdjust(...keysAndArgs: (string | number)[]): Promise<EvalAdjustReply>;
  evalSettle(...keysAndArgs: (string | number)[]): Promise<EvalSettleReply>;
}

export type MeteringRedis = RedisClient & MeteringCommands;

/** Loads the metering scripts on a client once (EVALSHA, falling back to EVAL after a restart). */
export function withMeteringCommands(redis: RedisClient): MeteringRedis {
  const target = redis as MeteringRedis;
  if (typeof target.evalGateBatch !== 'function') {
    redis.defineCommand('evalGateBatch', { lua: EVAL_GATE_BATCH });
    redis.defineCommand('evalAdjust', { numberOfKeys: 2, lua: EVAL_ADJUST });
    redis.defineCommand('evalSettle', { numberOfKeys: 3, lua: EVAL_SETTLE });
  }
  return target;
}
