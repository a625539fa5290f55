import { withScripts } from '@ent/common/redis/commands';
import type { RedisClient } from '@ent/common/redis/connect';
import { creditDirtyMember, meteredMember, parseMeteredMember, type RedisKeys } from '@ent/common/redis/keys';

/** A balance's figures as Redis holds them (decisions.md, "Metered usage: how it is built"). */
export interface DrainedBalance {
  member: string;
  subscriberId: string;
  feature: string;
  periodStartMs: number;
  /** null for reset "never". */
  periodEndMs: number | null;
  used: number;
  revision: number;
}

export interface Drained {
  balances: DrainedBalance[];
  /** Members the drain took whose balance is gone from Redis: nothing to persist. */
  vanished: number;
  /** Members left in the dirty set after the drain. */
  remaining: number;
}

/** A balance hash lives 35 days past its period's end; a never-reset balance does not expire. */
const BALANCE_RETENTION_MS = 35 * 24 * 60 * 60 * 1000;

interface BalanceCommands {
  meteredDrain(numberOfKeys: number, ...keysAndArgs: string[]): Promise<(number | string)[]>;
  meteredCorrect(...keysAndArgs: string[]): Promise<[number, number, number]>;
  meteredCorrectUndo(...keysAndArgs: string[]): Promise<[number, number]>;
}

const commandsOf = (redis: RedisClient) => withScripts(redis) as unknown as BalanceCommands;

/** Members of the organization's dirty set, at most `count` (distinct), for a drain to take. */
export const dirtyCandidates = (
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  count: number,
): Promise<string[]> => redis.srandmember(keys.meteredDirty(organizationId), count);

/** metered-drain-n.lua: takes the named members out of the dirty set with their figures, in one step. */
export async function drainBalances(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  members: readonly string[],
): Promise<Drained> {
  const balanceKeys = members.map((member) => keys.meteredBalance(organizationId, member));
  const reply = await commandsOf(redis).meteredDrain(
    1 + members.length,
    keys.meteredDirty(organizationId),
    ...balanceKeys,
    ...members,
  );
  const drained: Drained = { balances: [], vanished: 0, remaining: Number(reply[0]) };
  for (let i = 1; i + 3 < reply.length; i += 4) {
    const member = String(reply[i]);
    const [used, revision, end] = [reply[i + 1], reply[i + 2], reply[i + 3]].map(String);
    if (used === '' || revision === '') {
      drained.vanished += 1;
      continue;
    }
    drained.balances.push({
      member,
      ...parseMeteredMember(member),
      periodEndMs: end === '' ? null : Number(end),
      used: Number(used),
      revision: Number(revision),
    });
  }
  return drained;
}

/**
 * Marks members dirty again (a drain whose write failed): first in the organization's set, then the organization in
 * the global set, the order the gateway keeps too, so a worker that retires the organization meanwhile sees them.
 */
export async function markDirty(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  members: readonly string[],
): Promise<void> {
  if (members.length > 0) await redis.sadd(keys.meteredDirty(organizationId), ...members);
  await redis.sadd(keys.meteredDirtyOrganizations, organizationId);
}

/**
 * Takes the organization out of the global set once its dirty set is empty. Two commands on two slots cannot be
 * one script, so the order makes it safe: remove first, then look; a member added before the removal is seen
 * (it was added before its organization, which the removal then took), one added after re-adds the organization.
 */
export async function retireIfClean(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
): Promise<boolean> {
  await redis.srem(keys.meteredDirtyOrganizations, organizationId);
  if ((await redis.scard(keys.meteredDirty(organizationId))) === 0) return true;
  await redis.sadd(keys.meteredDirtyOrganizations, organizationId);
  return false;
}

export interface BalanceRef {
  organizationId: string;
  subscriberId: string;
  feature: string;
  periodStartMs: number;
  periodEndMs: number | null;
}

export interface AppliedCorrection {
  balance: BalanceRef;
  from: number;
  to: number;
  /** The revision it wrote; null when the figure already was `to` (nothing written). */
  revision: number | null;
}

const memberOf = (balance: BalanceRef) =>
  meteredMember(balance.subscriberId, balance.feature, balance.periodStartMs);

/**
 * metered-correct-2.lua, then the organization marked dirty. `durable`: what Postgres holds for the balance;
 * `creditIds`: the live credits in spending order, given back to (in reverse) when the figure drops below what
 * credits covered.
 */
export async function correctBalance(
  redis: RedisClient,
  keys: RedisKeys,
  balance: BalanceRef,
  used: number,
  durable: { used: number; revision: number } | null,
  creditIds: readonly string[] = [],
): Promise<AppliedCorrection> {
  const member = memberOf(balance);
  const { organizationId, periodEndMs } = balance;
  const [code, previous, revision] = await commandsOf(redis).meteredCorrect(
    keys.meteredBalance(organizationId, member),
    keys.meteredDirty(organizationId),
    member,
    String(used),
    periodEndMs === null ? '' : String(periodEndMs),
    periodEndMs === null ? '' : String(periodEndMs + BALANCE_RETENTION_MS),
    durable ? String(durable.used) : '',
    durable ? String(durable.revision) : '',
    ...(creditIds.length === 0
      ? []
      : [
          keys.creditSpent(organizationId, balance.subscriberId, balance.feature),
          creditDirtyMember(balance.subscriberId, balance.feature),
          ...creditIds,
        ]),
  );
  if (code === 1) return { balance, from: Number(previous), to: used, revision: null };
  await redis.sadd(keys.meteredDirtyOrganizations, organizationId);
  return { balance, from: Number(previous), to: used, revision: Number(revision) };
}

/** metered-correct-undo-2.lua: takes back a correction that did not commit. */
export async function undoCorrection(
  redis: RedisClient,
  keys: RedisKeys,
  correction: AppliedCorrection,
): Promise<void> {
  if (correction.revision === null) return;
  const member = memberOf(correction.balance);
  const { organizationId } = correction.balance;
  await commandsOf(redis).meteredCorrectUndo(
    keys.meteredBalance(organizationId, member),
    keys.meteredDirty(organizationId),
    member,
    String(correction.from),
    String(correction.to),
    String(correction.revision),
  );
  await redis.sadd(keys.meteredDirtyOrganizations, organizationId);
}
