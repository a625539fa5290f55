import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import {
  creditBalanceDirtyMember,
  creditDirtyMember,
  redisKeys,
  type RedisKeys,
} from '@ent/common/redis/keys';
import { deleteKeys } from '../../../test-support/redis-keys.ts';
import { redisCluster, singleRedis } from '../../../test-support/redis-setups.ts';
import {
  correctBalance,
  drainBalances,
  retireIfClean,
  undoCorrection,
} from '../../src/features/metered-usage/balance-scripts.ts';
import { changeBalance } from './balances.ts';

const DECEMBER = Date.UTC(2026, 11, 1);
const NOVEMBER = Date.UTC(2026, 10, 1);
const OCTOBER = Date.UTC(2026, 9, 1);

describe.each([singleRedis, redisCluster])('the metered balance scripts on $name', (setup) => {
  let stopRedis: () => Promise<void>;
  let redis: RedisClient;
  let keys: RedisKeys;
  const prefix = `t${randomBytes(5).toString('hex')}`;
  let organizations = 0;
  const newOrganization = () => `org_${prefix}${++organizations}`;
  const balance = (organizationId: string, subscriberId: string) => ({
    organizationId,
    subscriberId,
    feature: 'api-calls',
    periodStartMs: NOVEMBER,
    periodEndMs: DECEMBER,
  });

  beforeAll(async () => {
    const started = await setup.start();
    stopRedis = started.stop;
    redis = createRedis(started.config);
    keys = redisKeys(prefix);
  });
  afterAll(async () => {
    if (redis && !('nodes' in redis)) await deleteKeys(redis, `${prefix}:*`);
    redis?.disconnect();
    await stopRedis?.();
  });

  it('drains take members with their figures, each member once', async () => {
    const org = newOrganization();
    const members: string[] = [];
    for (const [i, subscriberId] of ['alice', 'bob', 'carol'].entries())
      members.push(
        await changeBalance(redis, keys, org, balance(org, subscriberId), {
          used: 10 * (i + 1),
          revision: i + 1,
        }),
      );
    const [first, second] = await Promise.all([
      drainBalances(redis, keys, org, 1),
      drainBalances(redis, keys, org, 1),
    ]);
    expect(first.taken + second.taken).toBe(2);
    const drained = [...first.balances, ...second.balances];
    expect(new Set(drained.map((entry) => entry.member)).size).toBe(2);
    for (const entry of drained) {
      const i = members.indexOf(entry.member);
      expect(entry).toMatchObject({
        feature: 'api-calls',
        periodStartMs: NOVEMBER,
        periodEndMs: DECEMBER,
        used: 10 * (i + 1),
        revision: i + 1,
      });
    }
    expect(Math.min(first.remaining, second.remaining)).toBe(1);
    expect(await retireIfClean(redis, keys, org)).toBe(false);
    expect(await redis.sismember(keys.meteredDirtyOrganizations, org)).toBe(1);
    // A balance gone from Redis (expired) is taken and counted, with nothing to persist.
    await redis.del(
      keys.meteredBalance(
        org,
        members.find((m) => !drained.some((d) => d.member === m))!,
      ),
    );
    const rest = await drainBalances(redis, keys, org, 10);
    expect(rest).toMatchObject({ taken: 1, balances: [], remaining: 0, vanished: 1 });
    expect(await drainBalances(redis, keys, org, 10)).toMatchObject({ taken: 0, balances: [] });
    expect(await retireIfClean(redis, keys, org)).toBe(true);
    expect(await redis.sismember(keys.meteredDirtyOrganizations, org)).toBe(0);
  });

  /** What a consume that changed credits leaves: the figures in the credit-spent hash, its member dirty. */
  const spendCredits = async (
    org: string,
    subscriberId: string,
    figures: Record<string, number | string>,
  ) => {
    await redis.hset(keys.creditSpent(org, subscriberId, 'api-calls'), figures);
    await redis.sadd(keys.meteredDirty(org), creditDirtyMember(subscriberId, 'api-calls'));
  };

  it('a drain that takes a balance that met credits reads its credit-spent hash in the same instant, taking its member too', async () => {
    // SPOP picks at random: organizations until the first drain of one member takes the balance, not the credit
    // member (one in two each; the bound makes a miss a 2^-20 chance).
    for (let attempt = 0; attempt < 20; attempt++) {
      const org = newOrganization();
      // A give-back to k = 0: the balance met credits (k is there), and the hash changed with it.
      const member = await changeBalance(redis, keys, org, balance(org, 'alice'), { used: 4, revision: 7 });
      await redis.hset(keys.meteredBalance(org, member), 'k', 0);
      await spendCredits(org, 'alice', { cr_a: 2 });
      const first = await drainBalances(redis, keys, org, 1);
      if (first.balances.length === 0) continue;
      expect(first).toMatchObject({
        taken: 2,
        members: [member, creditDirtyMember('alice', 'api-calls')],
        balances: [expect.objectContaining({ member, used: 4, revision: 7, covered: 0 })],
        creditHashes: [{ subscriberId: 'alice', feature: 'api-calls', fields: ['cr_a', '2'] }],
        remaining: 0,
      });
      expect(await redis.scard(keys.meteredDirty(org))).toBe(0);
      return;
    }
    throw new Error('no drain took the balance first in 20 organizations');
  });

  it('a balance that never met credits (no k, no ro) is drained without its credit-spent hash', async () => {
    const org = newOrganization();
    // bob's balance never met credits (no k: his hash is another period's), carol's has k.
    await redis.hset(keys.creditSpent(org, 'bob', 'api-calls'), { cr_b: 1 });
    await redis.hset(keys.creditSpent(org, 'carol', 'api-calls'), { cr_c: 3 });
    await changeBalance(redis, keys, org, balance(org, 'bob'), { used: 9, revision: 2 });
    const carol = await changeBalance(redis, keys, org, balance(org, 'carol'), { used: 5, revision: 3 });
    await redis.hset(keys.meteredBalance(org, carol), 'k', 3);
    const drained = await drainBalances(redis, keys, org, 10);
    expect(drained.taken).toBe(2);
    expect(drained.balances).toHaveLength(2);
    expect(drained.balances.find((entry) => entry.member === carol)).toMatchObject({ covered: 3 });
    // Read again with it (its own member taken too): written to the credit, and carried by her row.
    const carolHash = {
      subscriberId: 'carol',
      feature: 'api-calls',
      fields: ['cr_c', '3'],
      standalone: true,
    };
    expect(drained.creditHashes).toEqual([carolHash]);
    expect(drained.balances.find((entry) => entry.member === carol)?.creditHash).toEqual(carolHash);
    expect(drained.balances.find((entry) => entry.member !== carol)?.creditHash).toBeUndefined();
  });

  it('a credit member drained alone brings its hash, and a member of both kinds is read both ways', async () => {
    const org = newOrganization();
    await spendCredits(org, 'dave', { cr_d: 1, 'ro:cr_r': '4|1|2|3' });
    // Subscriber `credit`, feature `7`: its balance member 'credit|7|<start>' also names the hash of (7, <start>).
    const both = await changeBalance(
      redis,
      keys,
      org,
      { subscriberId: 'credit', feature: '7', periodStartMs: NOVEMBER, periodEndMs: DECEMBER },
      { used: 1, revision: 1 },
    );
    await redis.hset(keys.creditSpent(org, '7', String(NOVEMBER)), { cr_e: 5 });
    const drained = await drainBalances(redis, keys, org, 10);
    expect(drained.taken).toBe(2);
    expect(drained.balances).toEqual([
      expect.objectContaining({ member: both, subscriberId: 'credit', used: 1 }),
    ]);
    expect(drained.creditHashes).toHaveLength(2);
    expect(drained.creditHashes).toEqual(
      expect.arrayContaining([
        {
          subscriberId: 'dave',
          feature: 'api-calls',
          fields: ['cr_d', '1', 'ro:cr_r', '4|1|2|3'],
          standalone: true,
        },
        { subscriberId: '7', feature: String(NOVEMBER), fields: ['cr_e', '5'], standalone: true },
      ]),
    );
  });

  it("a balance's credit member brings the balance and its credit-spent hash in one step, each read once", async () => {
    const org = newOrganization();
    // Two periods of erin's balance met credits (the gateway's scripts name each as 'credit|<member>'); the
    // November one is also named plainly, by a change from before it met them.
    const november = await changeBalance(redis, keys, org, balance(org, 'erin'), { used: 6, revision: 4 });
    const october = await changeBalance(
      redis,
      keys,
      org,
      { ...balance(org, 'erin'), periodStartMs: OCTOBER, periodEndMs: NOVEMBER },
      { used: 2, revision: 9 },
    );
    await redis.srem(keys.meteredDirty(org), october);
    await redis.hset(keys.meteredBalance(org, november), 'k', 6);
    await redis.hset(keys.meteredBalance(org, october), 'k', 2);
    await redis.hset(keys.creditSpent(org, 'erin', 'api-calls'), { cr_e: 8 });
    await redis.sadd(
      keys.meteredDirty(org),
      creditBalanceDirtyMember(november),
      creditBalanceDirtyMember(october),
    );
    const drained = await drainBalances(redis, keys, org, 10);
    expect(drained.taken).toBe(3);
    expect(drained.members.sort()).toEqual(
      [november, creditBalanceDirtyMember(november), creditBalanceDirtyMember(october)].sort(),
    );
    expect(drained.balances).toHaveLength(2);
    expect(drained.balances).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ member: november, used: 6, covered: 6 }),
        expect.objectContaining({ member: october, used: 2, covered: 2 }),
      ]),
    );
    // Named by balance members only: its figures go into those balances' rows, not the credit's.
    const erinHash = { subscriberId: 'erin', feature: 'api-calls', fields: ['cr_e', '8'], standalone: false };
    expect(drained.creditHashes).toEqual([erinHash]);
    for (const read of drained.balances) expect(read.creditHash).toEqual(erinHash);
    expect(drained.remaining).toBe(0);
  });

  it("a hash brought by one balance that met credits is not given to its owner's balance that never met them", async () => {
    const org = newOrganization();
    const november = await changeBalance(redis, keys, org, balance(org, 'fay'), { used: 3, revision: 2 });
    const october = await changeBalance(
      redis,
      keys,
      org,
      { ...balance(org, 'fay'), periodStartMs: OCTOBER, periodEndMs: NOVEMBER },
      { used: 7, revision: 5 },
    );
    await redis.hset(keys.meteredBalance(org, october), 'k', 7);
    await redis.hset(keys.creditSpent(org, 'fay', 'api-calls'), { cr_f: 7 });
    // Neither a credit member nor a balance (five parts): read as a balance, which is not there.
    await redis.sadd(keys.meteredDirty(org), 'credit|fay|api-calls|1|2');
    const drained = await drainBalances(redis, keys, org, 10);
    expect(drained).toMatchObject({ taken: 3, vanished: 1, remaining: 0 });
    const fayHash = { subscriberId: 'fay', feature: 'api-calls', fields: ['cr_f', '7'], standalone: true };
    expect(drained.creditHashes).toEqual([fayHash]);
    expect(drained.balances.find((entry) => entry.member === october)?.creditHash).toEqual(fayHash);
    expect(drained.balances.find((entry) => entry.member === november)?.creditHash).toBeUndefined();
    // The hash's own member was taken with October's balance: it goes back with them should the write fail.
    expect(drained.members).toContain(creditDirtyMember('fay', 'api-calls'));
  });

  it('a drain whose read fails puts every member it took back, and fails', async () => {
    const org = newOrganization();
    const members = [];
    for (const subscriberId of ['gus', 'hal', 'ivy'])
      members.push(
        await changeBalance(redis, keys, org, balance(org, subscriberId), { used: 1, revision: 1 }),
      );
    await redis.hset(keys.meteredBalance(org, members[0]!), 'k', 1);
    await redis.sadd(keys.meteredDirty(org), creditDirtyMember('gus', 'api-calls'));
    // A key of another type where a balance should be: its HMGET fails after the SPOP took every member.
    await redis.del(keys.meteredBalance(org, members[2]!));
    await redis.set(keys.meteredBalance(org, members[2]!), 'not a hash');
    await expect(drainBalances(redis, keys, org, 10)).rejects.toThrow(/drain failed, its members put back/);
    expect((await redis.smembers(keys.meteredDirty(org))).sort()).toEqual(
      [...members, creditDirtyMember('gus', 'api-calls')].sort(),
    );
  });

  it('a correction and its undo', async () => {
    const org = newOrganization();
    await changeBalance(redis, keys, org, balance(org, 'alice'), { used: 40, revision: 3 });
    const unlimited = { limit: null, soft: false, credits: '', nowMs: NOVEMBER };
    const applied = await correctBalance(
      redis,
      keys,
      balance(org, 'alice'),
      10,
      { used: 30, revision: 2 },
      unlimited,
    );
    expect(applied).toMatchObject({ from: 40, to: 10, revision: 4 });
    const key = keys.meteredBalance(org, `alice|api-calls|${NOVEMBER}`);
    expect(await redis.hgetall(key)).toEqual({ u: '10', r: '4', e: String(DECEMBER) });
    await undoCorrection(redis, keys, applied);
    expect(await redis.hgetall(key)).toEqual({ u: '40', r: '5', e: String(DECEMBER) });
    const drained = await drainBalances(redis, keys, org, 10);
    expect(drained.balances).toEqual([expect.objectContaining({ used: 40, revision: 5 })]);
  });
});
