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
  /**
   * Its subscriber's credit-spent hash for the feature, when the drain read it in the same instant as this balance
   * (one MULTI): its figures are then persisted in this balance's row.
   */
  creditHash?: DrainedCreditHash;
}

/** A subscriber's credit-spent hash for one feature, read in the drain's one step with the balances (issue 35). */
export interface DrainedCreditHash {
  subscriberId: string;
  feature: string;
  /** credit id -> spent, and 'ro:<id>' -> a rollover credit's record. */
  fields: Record<string, string>;
  /**
   * Its figures must be written to the credits themselves: a `credit|<subscriber>|<feature>` member named it (a
   * write that moved spent without a balance: a refill, a correction's give-back, a rollover record), or no balance
   * of its owner was read with it. Otherwise the rows of the balances read with it carry them.
   */
  standalone: boolean;
}

export interface Drained {
  /** Members taken out of the dirty set (0: it was empty), credit members taken with their balances included. */
  taken: number;
  /** Every member taken, to mark dirty again should the write fail. */
  members: string[];
  balances: DrainedBalance[];
  /**
   * The credit-spent hashes the drain read, each in the same instant as the balances of its (subscriber, feature) it
   * took: those whose credit member it popped, and those of balances that met credits. Empty hashes are left out.
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

const figure = (value: string | undefined) => (value === undefined || value === '' ? 0 : Number(value));

type Owner = { subscriberId: string; feature: string };
type Replies = [Error | null, unknown][];

async function execAll(batch: ReturnType<RedisClient['pipeline']>, expected: number): Promise<Replies> {
  const replies = (await batch.exec()) ?? [];
  const failed = replies.find(([error]) => error !== null);
  if (failed || replies.length !== expected) throw failed?.[0] ?? new Error('No reply to the drain.');
  return replies;
}

/**
 * A balance hash as the drain reads it (HGETALL: two arguments, where HMGET of its fields took seven); null when it
 * is gone. `metCredits`: it holds k or ro, which the gateway's scripts write only once credits or a rollover touch
 * the balance (the refill keeps them absent otherwise).
 */
function balanceOf(member: string, fields: Record<string, string>) {
  if (fields.u === undefined || fields.r === undefined) return null;
  const balance: DrainedBalance = {
    member,
    ...parseMeteredMember(member),
    periodEndMs: fields.e === undefined || fields.e === '' ? null : Number(fields.e),
    used: Number(fields.u),
    revision: Number(fields.r),
    covered: figure(fields.k),
    rollover: figure(fields.ro),
  };
  return { balance, metCredits: fields.k !== undefined || fields.ro !== undefined };
}

/**
 * Takes up to `count` members out of the organization's dirty set and reads their figures: one SPOP (each member goes
 * to the one drain that popped it), then each balance's hash, the credit-spent hash of each credit member popped (a
 * balance's credit member, `credit|<balance member>`, names both: what the gateway marks once credits met it), and
 * the set's size, in one round trip (a MULTI when a credit member was popped: its hash and its balances are then of
 * one instant). A balance that never met credits (no k, no ro) persists covered = 0, which claims nothing of any
 * credit, so its credit-spent hash is not read: it waits for its own member. A balance that met credits is read again
 * with its credit-spent hash in a second MULTI, which also takes the hash's member out of the dirty set (listed in
 * `members`, to go back should the write fail): what Postgres holds of a balance is thus never ahead of the spent
 * figures it holds. A balance read in the same instant as its owner's hash carries it (`creditHash`): its row keeps the
 * figures; a hash no balance came with, or whose own member was taken, is `standalone`, written to the credits.
 * Balances without credits (nearly all) cost Redis one command each, and no MULTI. A change after
 * a read marks its member dirty again, so a later drain persists it; one read here already is written twice, the
 * second time over an equal revision, which writes nothing. A read that fails puts the members back.
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
  const drained: Drained = {
    taken: popped.length,
    members: popped,
    balances: [],
    creditHashes: [],
    vanished: 0,
    remaining: 0,
  };
  if (popped.length === 0) return drained;
  const { balances: members, others } = split(popped);
  // Owner member -> the owner and whether a `credit|<subscriber>|<feature>` member of its own was popped.
  const poppedOwners = new Map<string, Owner & { named: boolean }>();
  for (const member of others) {
    const { subscriberId, feature, balanceMember } = parseCreditDirtyMember(member)!;
    const ownerMember = creditDirtyMember(subscriberId, feature);
    const known = poppedOwners.get(ownerMember);
    const named = balanceMember === undefined || (known?.named ?? false);
    poppedOwners.set(ownerMember, { subscriberId, feature, named });
  }
  // The hashes read, by owner member, and the balances read with each (in the same MULTI).
  const hashes = new Map<string, DrainedCreditHash>();
  const readWith = new Map<string, DrainedBalance[]>();
  const hashOf = (ownerMember: string, owner: Owner & { named: boolean }, fields: Record<string, string>) => {
    const { subscriberId, feature, named } = owner;
    hashes.set(ownerMember, { subscriberId, feature, fields, standalone: named });
  };
  const settleHashes = () => {
    for (const [ownerMember, hash] of hashes) {
      const withIt = readWith.get(ownerMember) ?? [];
      if (withIt.length === 0) hash.standalone = true;
      for (const balance of withIt) balance.creditHash = hash;
      if (Object.keys(hash.fields).length > 0 || withIt.length > 0) drained.creditHashes.push(hash);
    }
  };
  const readWithHash = (ownerMember: string, balance: DrainedBalance) => {
    const list = readWith.get(ownerMember);
    if (list) list.push(balance);
    else readWith.set(ownerMember, [balance]);
  };
  try {
    const first = poppedOwners.size > 0 ? redis.multi() : redis.pipeline();
    for (const member of members) first.hgetall(keys.meteredBalance(organizationId, member));
    for (const { subscriberId, feature } of poppedOwners.values())
      first.hgetall(keys.creditSpent(organizationId, subscriberId, feature));
    first.scard(dirtyKey);
    const replies = await execAll(first, members.length + poppedOwners.size + 1);
    // Balances that met credits and whose hash this read did not take: owner -> its members here.
    const again = new Map<string, { owner: Owner; members: string[] }>();
    for (let i = 0; i < members.length; i++) {
      const member = members[i]!;
      const read = balanceOf(member, replies[i]![1] as Record<string, string>);
      if (read === null) {
        drained.vanished += 1;
        continue;
      }
      const { subscriberId, feature } = read.balance;
      const ownerMember = creditDirtyMember(subscriberId, feature);
      if (poppedOwners.has(ownerMember)) readWithHash(ownerMember, read.balance);
      else if (read.metCredits) {
        const entry = again.get(ownerMember) ?? { owner: { subscriberId, feature }, members: [] };
        entry.members.push(member);
        again.set(ownerMember, entry);
        continue;
      }
      drained.balances.push(read.balance);
    }
    let at = members.length;
    for (const [ownerMember, owner] of poppedOwners)
      hashOf(ownerMember, owner, replies[at++]![1] as Record<string, string>);
    drained.remaining = Number(replies[at]![1]);
    if (again.size === 0) {
      settleHashes();
      return drained;
    }

    const second = redis.multi();
    let expected = 1;
    for (const { owner, members: ofOwner } of again.values()) {
      for (const member of ofOwner) second.hgetall(keys.meteredBalance(organizationId, member));
      second.hgetall(keys.creditSpent(organizationId, owner.subscriberId, owner.feature));
      expected += ofOwner.length + 1;
    }
    const creditMembers = [...again.keys()];
    second.srem(dirtyKey, ...creditMembers);
    // Taken with the balances: put back with them should the write fail.
    drained.members.push(...creditMembers);
    const more = await execAll(second, expected);
    at = 0;
    for (const [ownerMember, { owner, members: ofOwner }] of again) {
      for (const member of ofOwner) {
        const read = balanceOf(member, more[at++]![1] as Record<string, string>);
        if (read === null) drained.vanished += 1;
        else {
          drained.balances.push(read.balance);
          readWithHash(ownerMember, read.balance);
        }
      }
      // Its own member was taken out of the set here: whatever it stood for is persisted with this read.
      hashOf(ownerMember, { ...owner, named: true }, more[at++]![1] as Record<string, string>);
    }
    settleHashes();
    const alsoTaken = Number(more[at]![1]);
    drained.taken += alsoTaken;
    drained.remaining = Math.max(0, drained.remaining - alsoTaken);
    return drained;
  } catch (error) {
    // Redis gone as well: the put-back fails too, and the figures wait in their hashes (decisions.md).
    await markDirty(redis, keys, organizationId, drained.members).catch(() => undefined);
    throw error;
  }
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
