import { withScripts } from '@ent/common/redis/commands';
import type { RedisClient } from '@ent/common/redis/connect';
import {
  creditDirtyMember,
  meteredMember,
  parseCreditDirtyMember,
  parseMeteredMember,
  type RedisKeys,
} from '@ent/common/redis/keys';

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
  /** What credits covered of `used` (`k`, issue 35). */
  covered: number;
  /** The period's rollover amount (`ro`). */
  rollover: number;
}

/** A subscriber's credit-spent hash for one feature, read in the drain's one step with the balances (issue 35). */
export interface DrainedCreditHash {
  subscriberId: string;
  feature: string;
  /** credit id -> spent, and 'ro:<id>' -> a rollover credit's record. */
  fields: Record<string, string>;
}

export interface Drained {
  /** Members taken out of the dirty set (0: it was empty). */
  taken: number;
  /** Every member taken, to mark dirty again should the write fail. */
  members: string[];
  balances: DrainedBalance[];
  /**
   * The credit-spent hash of every (subscriber, feature) the drain took a balance or a credit member of, read in
   * the same MULTI as the balances: the spent figures persisted with a balance are those of the same instant.
   */
  creditHashes: DrainedCreditHash[];
  /** Members the drain took whose balance is gone from Redis: nothing to persist. */
  vanished: number;
  /** Members left in the dirty set after the drain. */
  remaining: number;
}

/** A balance hash lives 35 days past its period's end; a never-reset balance does not expire. */
const BALANCE_RETENTION_MS = 35 * 24 * 60 * 60 * 1000;

interface BalanceCommands {
  meteredCorrect(...keysAndArgs: string[]): Promise<[number, number, number]>;
  meteredCorrectUndo(...keysAndArgs: string[]): Promise<[number, number]>;
}

const commandsOf = (redis: RedisClient) => withScripts(redis) as unknown as BalanceCommands;

const allBalances = (members: readonly string[]) => ({ balances: [...members], others: [] });

const figure = (value: string | null | undefined) => (value == null || value === '' ? 0 : Number(value));

/**
 * Takes up to `count` members out of the organization's dirty set and reads their figures: one SPOP (each member goes
 * to the one drain that popped it), then one MULTI (one instant of Redis) with an HMGET per balance member, an
 * HGETALL of the credit-spent hash of each (subscriber, feature) named by a balance or credit member, and the set's
 * size. A change after the pop marks its member dirty again, so a later drain persists it; one read here already is
 * written twice, the second time over an equal revision, which writes nothing. A read that fails puts the members
 * back.
 */
export async function drainBalances(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  count: number,
  split: (members: readonly string[]) => { balances: string[]; others: string[] } = allBalances,
): Promise<Drained> {
  const dirtyKey = keys.meteredDirty(organizationId);
  const popped = await redis.spop(dirtyKey, count);
  const { balances: members, others } = split(popped);
  const drained: Drained = {
    taken: popped.length,
    members: popped,
    balances: [],
    creditHashes: [],
    vanished: 0,
    remaining: 0,
  };
  if (popped.length === 0) return drained;
  const owners = new Map<string, { subscriberId: string; feature: string }>();
  for (const member of members) {
    const { subscriberId, feature } = parseMeteredMember(member);
    owners.set(creditDirtyMember(subscriberId, feature), { subscriberId, feature });
  }
  for (const member of others) owners.set(member, parseCreditDirtyMember(member)!);
  const multi = redis.multi();
  for (const member of members)
    multi.hmget(keys.meteredBalance(organizationId, member), 'u', 'r', 'e', 'k', 'ro');
  for (const { subscriberId, feature } of owners.values())
    multi.hgetall(keys.creditSpent(organizationId, subscriberId, feature));
  multi.scard(dirtyKey);
  const expected = members.length + owners.size + 1;
  let replies: [Error | null, unknown][];
  try {
    replies = (await multi.exec()) ?? [];
    const failed = replies.find(([error]) => error !== null);
    if (failed || replies.length !== expected) throw failed?.[0] ?? new Error('No reply to the drain.');
  } catch (error) {
    // Redis gone as well: the put-back fails too, and the figures wait in their hashes (decisions.md).
    await markDirty(redis, keys, organizationId, popped).catch(() => undefined);
    throw error;
  }
  for (let i = 0; i < members.length; i++) {
    const member = members[i]!;
    const [used, revision, end, covered, rollover] = replies[i]![1] as (string | null)[];
    if (used == null || revision == null) {
      drained.vanished += 1;
      continue;
    }
    drained.balances.push({
      member,
      ...parseMeteredMember(member),
      periodEndMs: end == null || end === '' ? null : Number(end),
      used: Number(used),
      revision: Number(revision),
      covered: figure(covered),
      rollover: figure(rollover),
    });
  }
  let at = members.length;
  for (const owner of owners.values()) {
    const fields = (replies[at++]![1] ?? {}) as Record<string, string>;
    if (Object.keys(fields).length > 0) drained.creditHashes.push({ ...owner, fields });
  }
  drained.remaining = Number(replies[at]![1]);
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
