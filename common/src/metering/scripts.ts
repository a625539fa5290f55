import { readFileSync } from 'node:fs';
import type { RedisClient } from '../redis/connect.ts';

const lua = (name: string) => readFileSync(new URL(`../redis/lua/${name}`, import.meta.url), 'utf8');

const EVAL_GATE_BATCH = lua('eval-gate-batch.lua');
const EVAL_ADJUST = lua('eval-adjust-2.lua');

/**
 * Raw replies; see each script's header. The batch reply is a header (status 0, limit, blocking, catalog
 * version, auth version) then GATE_REPLY_WIDTH numbers per eval (code, count, subscriber version), or `[3]`
 * when Redis holds no arrangement.
 */
export type EvalGateBatchReply = [number, ...number[]];
export const GATE_REPLY_HEADER = 5;
export const GATE_REPLY_WIDTH = 3;
export type EvalAdjustReply = [number, number];

export interface MeteringCommands {
  /** First argument: the number of keys (5 + evals). */
  evalGateBatch(...numKeysKeysAndArgs: (string | number)[]): Promise<EvalGateBatchReply>;
  evalAdjust(...keysAndArgs: (string | number)[]): Promise<EvalAdjustReply>;
}

export type MeteringRedis = RedisClient & MeteringCommands;

/** Loads the metering scripts on a client once (EVALSHA, falling back to EVAL after a restart). */
export function withMeteringCommands(redis: RedisClient): MeteringRedis {
  const target = redis as MeteringRedis;
  if (typeof target.evalGateBatch !== 'function') {
    redis.defineCommand('evalGateBatch', { lua: EVAL_GATE_BATCH });
    redis.defineCommand('evalAdjust', { numberOfKeys: 2, lua: EVAL_ADJUST });
  }
  return target;
}
