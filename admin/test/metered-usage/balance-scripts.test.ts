import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { redisKeys, type RedisKeys } from '@ent/common/redis/keys';
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
    await redis.del(keys.meteredBalance(org, members.find((m) => !drained.some((d) => d.member === m))!));
    const rest = await drainBalances(redis, keys, org, 10);
    expect(rest).toMatchObject({ taken: 1, balances: [], remaining: 0, vanished: 1 });
    expect(await drainBalances(redis, keys, org, 10)).toMatchObject({ taken: 0, balances: [] });
    expect(await retireIfClean(redis, keys, org)).toBe(true);
    expect(await redis.sismember(keys.meteredDirtyOrganizations, org)).toBe(0);
  });

  it('a correction and its undo', async () => {
    const org = newOrganization();
    await changeBalance(redis, keys, org, balance(org, 'alice'), { used: 40, revision: 3 });
    const applied = await correctBalance(redis, keys, balance(org, 'alice'), 10, { used: 30, revision: 2 });
    expect(applied).toMatchObject({ from: 40, to: 10, revision: 4 });
    const key = keys.meteredBalance(org, `alice|api-calls|${NOVEMBER}`);
    expect(await redis.hgetall(key)).toEqual({ u: '10', r: '4', e: String(DECEMBER) });
    await undoCorrection(redis, keys, applied);
    expect(await redis.hgetall(key)).toEqual({ u: '40', r: '5', e: String(DECEMBER) });
    const drained = await drainBalances(redis, keys, org, 10);
    expect(drained.balances).toEqual([expect.objectContaining({ used: 40, revision: 5 })]);
  });
});
