import { balanceTtlMs } from '@ent/common/metering/metered-period';
import { refillArguments, type RefillBalance, type RefillSpent } from '@ent/common/metering/refill-arguments';
import { withScripts } from '@ent/common/redis/commands';
import type { RedisClient } from '@ent/common/redis/connect';
import { creditDirtyMember, meteredMember, parseMeteredMember, type RedisKeys } from '@ent/common/redis/keys';
import type { RefillFigures } from './open-balances.ts';

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
   * (one script call): its figures are then persisted in this balance's row.
   */
  creditHash?: DrainedCreditHash;
}

/** A subscriber's credit-spent hash for one feature, read in the drain's one step with the balances (issue 35). */
export interface DrainedCreditHash {
  subscriberId: string;
  feature: string;
  /**
   * Its fields as HGETALL lists them, field then value: credit id and spent, 'ro:<id>' and a rollover credit's record.
   * A flat list, not an object: credit ids as property names make an object per hash in dictionary mode, which cost
   * the worker more than the rest of a credit hash's persisting (`npm run bench -- persist`, its CPU profile).
   */
  fields: readonly string[];
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
   * took: those whose credit member it popped, and those of balances that met credits. An empty hash is left out
   * unless a balance was read with it.
   */
  creditHashes: DrainedCreditHash[];
  /** Members the drain took whose balance is gone from Redis: nothing to persist. */
  vanished: number;
  /** Members left in the dirty set after the drain. */
  remaining: number;
}

interface BalanceCommands {
  meteredRefill(...keysAndArgs: (string | number)[]): Promise<number>;
  meteredCorrect(...keysAndArgs: string[]): Promise<[number, number, number]>;
  meteredCorrectUndo(...keysAndArgs: string[]): Promise<[number, number]>;
  meteredDrain(...keysAndArgs: (string | number)[]): Promise<DrainReply>;
}

/** metered-drain-1.lua's reply (its header says what each part holds). */
type DrainReply = [
  taken: string[],
  balances: string[],
  figures: (string | number | null)[],
  owners: string[],
  named: number[],
  hashes: string[][],
  alsoTaken: number,
  remaining: number,
];

/** `named` in the drain's reply: the hash's own member was taken by the script, for a balance that met credits. */
const TAKEN_WITH_BALANCE = 2;

const commandsOf = (redis: RedisClient) => withScripts(redis) as unknown as BalanceCommands;

const figure = (value: string | number | null | undefined) =>
  value === null || value === undefined || value === '' ? 0 : Number(value);

/**
 * Takes up to `count` members out of the organization's dirty set and reads their figures in one script call
 * (metered-drain-1.lua: each member goes to the one drain that took it). A balance's credit member,
 * `credit|<balance member>`, names the balance and its subscriber's credit-spent hash for the feature, read in the same
 * instant; so does a balance that met credits (k or ro) with no member naming its hash, whose hash's own member is
 * then taken too (listed in `members`, to go back should the write fail): what Postgres holds of a balance is thus
 * never ahead of the spent figures it holds. A balance that never met credits persists covered = 0, which claims
 * nothing of any credit, so its hash is not read: it waits for its own member. A balance read with its owner's hash
 * carries it (`creditHash`): its row keeps the figures; a hash no balance came with, or whose own member was taken,
 * is `standalone`, written to the credits. A change after the read marks its member dirty again, so a later drain
 * persists it; one read here already is written twice, the second time over an equal revision, which writes nothing.
 */
export async function drainBalances(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  count: number,
): Promise<Drained> {
  const reply = await commandsOf(redis).meteredDrain(
    keys.meteredDirty(organizationId),
    keys.meteredBalance(organizationId, ''),
    count,
    keys.creditSpentPrefix(organizationId),
  );
  const [taken, balanceMembers, figures, owners, named, hashFields, alsoTaken, remaining] = reply;
  if (
    figures.length !== 6 * balanceMembers.length ||
    named.length !== owners.length ||
    hashFields.length !== owners.length
  )
    throw new Error('metered-drain-1.lua answered a reply of another shape');
  const hashes = owners.map((owner, i): DrainedCreditHash => {
    const bar = owner.indexOf('|');
    return {
      subscriberId: owner.slice(0, bar),
      feature: owner.slice(bar + 1),
      fields: hashFields[i]!,
      standalone: false,
    };
  });
  const drained: Drained = {
    taken: taken.length + alsoTaken,
    members: [...taken],
    balances: [],
    creditHashes: [],
    vanished: 0,
    remaining,
  };
  const readWith = new Array<number>(hashes.length).fill(0);
  for (let i = 0, at = 0; i < balanceMembers.length; i++, at += 6) {
    const used = figures[at] ?? null;
    const revision = figures[at + 1] ?? null;
    if (used === null || revision === null) {
      drained.vanished += 1;
      continue;
    }
    const member = balanceMembers[i]!;
    const end = figures[at + 2] ?? null;
    const withHash = Number(figures[at + 5]);
    const balance: DrainedBalance = {
      member,
      ...parseMeteredMember(member),
      periodEndMs: end === null || end === '' ? null : Number(end),
      used: Number(used),
      revision: Number(revision),
      covered: figure(figures[at + 3]),
      rollover: figure(figures[at + 4]),
    };
    if (withHash > 0) {
      balance.creditHash = hashes[withHash - 1]!;
      readWith[withHash - 1]! += 1;
    }
    drained.balances.push(balance);
  }
  for (const [i, hash] of hashes.entries()) {
    // Its member taken by the script, with the balance that met credits: put back with them should the write fail.
    if (named[i] === TAKEN_WITH_BALANCE)
      drained.members.push(creditDirtyMember(hash.subscriberId, hash.feature));
    hash.standalone = named[i] !== 0 || readWith[i] === 0;
    if (hashFields[i]!.length > 0 || readWith[i]! > 0) drained.creditHashes.push(hash);
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

/** What a correction spends and gives back by: the balance's terms and credits, as a report's `set` has them. */
export interface CorrectionTerms {
  /** null: unlimited (credits are not touched). */
  limit: number | null;
  soft: boolean;
  /** The balance's credits as metered-credits.fragment.lua takes them (common/src/metering/credit-spec.ts); '' none. */
  credits: string;
  /** The app clock's now: the balance lives until 35 days after its period's end from it. */
  nowMs: number;
}

export interface AppliedCorrection {
  balance: BalanceRef;
  terms: CorrectionTerms;
  from: number;
  to: number;
  /** The revision it wrote; null when the figure already was `to` (nothing written). */
  revision: number | null;
}

const memberOf = (balance: BalanceRef) =>
  meteredMember(balance.subscriberId, balance.feature, balance.periodStartMs);

/** The arguments both correction scripts end with: period end, time to live, limit, soft, credits. */
function termsArguments(balance: BalanceRef, terms: CorrectionTerms): string[] {
  const ttl = balanceTtlMs(balance.periodEndMs, terms.nowMs);
  return [
    balance.periodEndMs === null ? '' : String(balance.periodEndMs),
    ttl === null ? '' : String(ttl),
    terms.limit === null ? '' : String(terms.limit),
    terms.soft ? '1' : '',
    terms.credits,
  ];
}

/**
 * metered-correct-2.lua, then the organization marked dirty. `durable`: what Postgres holds for the balance. The
 * figure is set by the balance rule, so credits are spent and given back as a report's `set` does.
 */
export async function correctBalance(
  redis: RedisClient,
  keys: RedisKeys,
  balance: BalanceRef,
  used: number,
  durable: { used: number; revision: number } | null,
  terms: CorrectionTerms,
): Promise<AppliedCorrection> {
  const member = memberOf(balance);
  const { organizationId } = balance;
  const [code, previous, revision] = await commandsOf(redis).meteredCorrect(
    keys.meteredBalance(organizationId, member),
    keys.meteredDirty(organizationId),
    member,
    String(used),
    durable ? String(durable.used) : '',
    durable ? String(durable.revision) : '',
    ...termsArguments(balance, terms),
  );
  if (code === 1) return { balance, terms, from: Number(previous), to: used, revision: null };
  await redis.sadd(keys.meteredDirtyOrganizations, organizationId);
  return { balance, terms, from: Number(previous), to: used, revision: Number(revision) };
}

/**
 * Before a correction on a Redis that lost the organization (no readiness mark yet): the persisted figures of the
 * balance's owner (subscriber and feature) that Redis lacks are put back through a gateway's refill script
 * (metered-refill-2.lua), so the correction spends and gives back from what credits covered, the period's rollover and
 * what each credit spent, and a period it creates reads the ended period it rolls over from. Merge only: the gateways
 * still merge their own last figures and mark the organization ready (metered-balances.ts).
 */
export async function mergePersistedOwner(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  figures: RefillFigures,
  nowMs: number,
): Promise<void> {
  // Only what Redis lacks: a figure Redis holds is newer than Postgres's (a correction lowered it, not persisted yet),
  // and "largest wins" would raise it back. Whether each is there: one round trip.
  const members = figures.balances.map((balance) =>
    meteredMember(balance.subscriber_id, balance.feature, balance.period_start_ms),
  );
  const held = redis.pipeline();
  for (const member of members) held.exists(keys.meteredBalance(organizationId, member));
  for (const credit of figures.credits)
    held.hexists(keys.creditSpent(organizationId, credit.subscriber_id, credit.feature), credit.credit_id);
  const isHeld = ((await held.exec()) ?? []).map(([error, found]) => {
    if (error) throw error;
    return found === 1;
  });
  const balances = new Map<string, RefillBalance>();
  for (const [i, balance] of figures.balances.entries()) {
    if (isHeld[i]) continue;
    balances.set(members[i]!, {
      used: balance.used,
      revision: balance.revision,
      periodEndMs: balance.period_end_ms,
      covered: balance.covered,
      rollover: balance.rollover,
    });
  }
  const spent = new Map<string, RefillSpent>();
  for (const [i, credit] of figures.credits.entries()) {
    if (isHeld[members.length + i]) continue;
    const member = creditDirtyMember(credit.subscriber_id, credit.feature);
    const entry = spent.get(member) ?? {
      subscriberId: credit.subscriber_id,
      feature: credit.feature,
      figures: new Map(),
    };
    (entry.figures as Map<string, number>).set(credit.credit_id, credit.spent);
    spent.set(member, entry);
  }
  if (balances.size === 0 && spent.size === 0) return;
  await commandsOf(redis).meteredRefill(
    keys.meteredReady(organizationId),
    keys.meteredDirty(organizationId),
    ...refillArguments(keys, organizationId, balances, spent, nowMs, false),
  );
  await redis.sadd(keys.meteredDirtyOrganizations, organizationId);
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
    ...termsArguments(correction.balance, correction.terms),
  );
  await redis.sadd(keys.meteredDirtyOrganizations, organizationId);
}
