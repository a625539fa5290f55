import { withScripts } from '@ent/common/redis/commands';
import type { RedisClient } from '@ent/common/redis/connect';
import {
  creditDirtyMember,
  meteredMember,
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
  /** Members taken out of the dirty set (0: it was empty), credit members taken with their balances included. */
  taken: number;
  /** Every member taken, to mark dirty again should the write fail. */
  members: string[];
  balances: DrainedBalance[];
  /**
   * The credit-spent hashes the drain read with the balances, in the same instant (metered-drain-1.lua): those whose
   * credit member it took, and those of balances with credits in play. Empty hashes are left out.
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
  meteredDrain(...keysAndArgs: (string | number)[]): Promise<(string | number)[]>;
}

const commandsOf = (redis: RedisClient) => withScripts(redis) as unknown as BalanceCommands;

const figure = (value: string) => (value === '' ? 0 : Number(value));

/** The prefix metered-drain-1.lua puts before '<subscriber>|<feature>' to name a credit-spent hash. */
function creditSpentPrefix(keys: RedisKeys, organizationId: string): string {
  const named = keys.creditSpent(organizationId, 's', 'f');
  if (!named.endsWith(':s|f')) throw new Error(`Unexpected credit-spent key ${named}.`);
  return named.slice(0, -'s|f'.length);
}

/**
 * Takes up to `count` members out of the organization's dirty set and reads their figures, in one call of
 * metered-drain-1.lua (one instant of Redis; each member goes to the one drain that popped it): each balance
 * member's `u r e k ro`, the credit-spent hash of each (subscriber, feature) whose credit member it took (popped, or
 * still dirty: taken with them) or whose balance has credits in play, and the set's size. A hash whose credit member
 * is not dirty holds what Postgres holds, so it is not read: the spent figures Postgres holds with a balance are still
 * those of the same instant. A change after the drain marks its member dirty again, so a later drain persists it;
 * one read here already is written twice, the second time over an equal revision, which writes nothing. A read that
 * fails puts the members back (those it popped; the call is atomic, so a failed one took nothing else).
 */
export async function drainBalances(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  count: number,
): Promise<Drained> {
  const dirtyKey = keys.meteredDirty(organizationId);
  const reply = await commandsOf(redis).meteredDrain(
    dirtyKey,
    count,
    keys.meteredBalance(organizationId, ''),
    creditSpentPrefix(keys, organizationId),
  );
  const text = reply as string[];
  const popped = Number(reply[1]);
  const members = text.slice(2, 2 + popped);
  const drained: Drained = {
    taken: popped,
    members,
    balances: [],
    creditHashes: [],
    vanished: 0,
    remaining: Number(reply[0]),
  };
  let at = 2 + popped;
  for (let i = 0; i < popped; i++, at += 5) {
    const used = text[at]!;
    if (used === '-') continue; // a credit member only
    const revision = text[at + 1]!;
    if (used === '' || revision === '') {
      drained.vanished += 1;
      continue;
    }
    const member = members[i]!;
    const end = text[at + 2]!;
    drained.balances.push({
      member,
      ...parseMeteredMember(member),
      periodEndMs: end === '' ? null : Number(end),
      used: Number(used),
      revision: Number(revision),
      covered: figure(text[at + 3]!),
      rollover: figure(text[at + 4]!),
    });
  }
  const hashes = Number(reply[at++]);
  for (let i = 0; i < hashes; i++) {
    const owner = text[at]!;
    const pairs = Number(reply[at + 1]);
    at += 2;
    const fields: Record<string, string> = {};
    for (let j = 0; j < pairs; j++, at += 2) fields[text[at]!] = text[at + 1]!;
    const bar = owner.indexOf('|');
    drained.creditHashes.push({ subscriberId: owner.slice(0, bar), feature: owner.slice(bar + 1), fields });
  }
  const alsoTaken = Number(reply[at++]);
  for (let i = 0; i < alsoTaken; i++) members.push(text[at + i]!);
  drained.taken += alsoTaken;
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
