import { readFileSync } from 'node:fs';
import type { RedisClient } from './client.ts';

const lua = (name: string) => readFileSync(new URL(`./lua/${name}`, import.meta.url), 'utf8');
/**
 * The metered balance rule, prepended to every script that reads or changes a balance (one rule, one place), after
 * where it reads and writes (Redis, or a batch's buffer).
 */
const withMeteredBalance = (name: string) =>
  `${lua('metered-store.fragment.lua')}\n${lua('metered-credits.fragment.lua')}\n${lua('metered-balance.fragment.lua')}\n${lua(name)}`;

/**
 * Every Lua script of the services, by command name: the files in `lua/`, named `<name>-<numberOfKeys>.lua`, or
 * `<name>-n.lua` for a script called with a variable number of keys (no `numberOfKeys`: the caller passes numkeys).
 */
const SCRIPTS = {
  entSnapshotPut: { numberOfKeys: 1, lua: lua('snapshot-put-1.lua') },
  entSubscriberPut: { numberOfKeys: 2, lua: lua('subscriber-put-2.lua') },
  entSubscribersPut: { lua: lua('subscribers-put-n.lua') },
  entSubscribersBehind: { lua: lua('subscribers-behind-n.lua') },
  entArrangementPut: { numberOfKeys: 2, lua: lua('arrangement-put-2.lua') },
  evalGateBatch: { numberOfKeys: 7, lua: withMeteredBalance('eval-gate-batch-8.lua') },
  usageApply: { numberOfKeys: 5, lua: withMeteredBalance('usage-apply-6.lua') },
  meteredRefill: { numberOfKeys: 2, lua: lua('metered-refill-2.lua') },
  meteredReady: { numberOfKeys: 2, lua: lua('metered-ready-2.lua') },
  meteredDrain: { numberOfKeys: 1, lua: lua('metered-drain-1.lua') },
  usageRate: { numberOfKeys: 2, lua: lua('usage-rate-2.lua') },
  evalAdjust: { numberOfKeys: 2, lua: lua('eval-adjust-2.lua') },
  evalSettle: { numberOfKeys: 4, lua: withMeteredBalance('eval-settle-4.lua') },
  windowTake: { numberOfKeys: 1, lua: lua('window-take-1.lua') },
  windowGiveBack: { numberOfKeys: 1, lua: lua('window-give-back-1.lua') },
  meteredCorrect: { numberOfKeys: 2, lua: withMeteredBalance('metered-correct-2.lua') },
  meteredCorrectUndo: { numberOfKeys: 2, lua: withMeteredBalance('metered-correct-undo-2.lua') },
  creditVoidRollover: { numberOfKeys: 1, lua: lua('credit-void-rollover-1.lua') },
} as const;

type Reply = Promise<number | (number | string)[]>;
export type ScriptCommands = {
  [Name in keyof typeof SCRIPTS]: (...keysAndArgs: (string | number)[]) => Reply;
};

/**
 * Defines every script on a client (EVALSHA, falling back to EVAL after a Redis restart), once. createRedis does
 * it as the client is made: defining a command while auto-pipelines are in flight is unsafe in ioredis (a
 * pipeline made before the definition does not know the script, its replies fall out of step with its
 * callbacks, and ioredis throws from a nextTick, ending the process). The check here is for clients made
 * elsewhere.
 */
export function withScripts<T extends RedisClient>(redis: T): T & ScriptCommands {
  const target = redis as T & ScriptCommands;
  for (const [name, definition] of Object.entries(SCRIPTS)) {
    if (typeof (target as unknown as Record<string, unknown>)[name] !== 'function')
      redis.defineCommand(name, definition);
  }
  return target;
}
