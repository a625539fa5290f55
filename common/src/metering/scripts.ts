import { readFileSync } from 'node:fs';
import type { RedisClient } from '../redis/connect.ts';

const lua = (name: string) => readFileSync(new URL(`../redis/lua/${name}`, import.meta.url), 'utf8');

const EVAL_GATE = lua('eval-gate-6.lua');
const EVAL_ADJUST = lua('eval-adjust-2.lua');

/** Raw replies; see each script's header. */
export type EvalGateReply = [number, number, number, number, number, number, number, number];
export type EvalAdjustReply = [number, number];

export interface MeteringCommands {
  evalGate(...keysAndArgs: (string | number)[]): Promise<EvalGateReply>;
  evalAdjust(...keysAndArgs: (string | number)[]): Promise<EvalAdjustReply>;
}

export type MeteringRedis = RedisClient & MeteringCommands;

/** Loads the metering scripts on a client once (EVALSHA, falling back to EVAL after a restart). */
export function withMeteringCommands(redis: RedisClient): MeteringRedis {
  const target = redis as MeteringRedis;
  if (typeof target.evalGate !== 'function') {
    redis.defineCommand('evalGate', { numberOfKeys: 6, lua: EVAL_GATE });
    redis.defineCommand('evalAdjust', { numberOfKeys: 2, lua: EVAL_ADJUST });
  }
  return target;
}
