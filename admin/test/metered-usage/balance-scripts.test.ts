import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { redisKeys, type RedisKeys } from '@ent/common/redis/keys';
import { deleteKeys } from '../../../test-support/redis-keys.ts';
import { redisCluster, singleRedis } from '../../../test-support/redis-setups.ts';
import {
  correctBalance,
  dirtyCandidates,
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

  it('a drain takes the named members with their figures, once', async () => {
    const org = newOrganization();
    for (const [i, subscriberId] of ['alice', 'bob', 'carol'].entries())
      await changeBalance(redis, keys, org, balance(org, subscriberId), {
        used: 10 * (i + 1),
        revision: i + 1,
      });
    const members = await dirtyCandidates(redis, keys, org, 2);
    expect(members).toHaveLength(2);
    const [first, second] = await Promise.all([
      drainBalances(redis, keys, org, members),
      drainBalances(redis, keys, org, members),
    ]);
    expect(first.balances.length + second.balances.length).toBe(2);
    const drained = [...first.balances, ...second.balances].sort((a, b) => a.used - b.used);
    expect(drained.map((entry) => entry.member)).toEqual([...members].sort());
    expect(drained[0]).toMatchObject({
      feature: 'api-calls',
      periodStartMs: NOVEMBER,
      periodEndMs: DECEMBER,
    });
    expect(Math.min(first.remaining, second.remaining)).toBe(1);
    expect(await retireIfClean(redis, keys, org)).toBe(false);
    expect(await redis.sismember(keys.meteredDirtyOrganizations, org)).toBe(1);
    const rest = await drainBalances(redis, keys, org, await dirtyCandidates(redis, keys, org, 10));
    expect(rest).toMatchObject({ remaining: 0, vanished: 0 });
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
    const drained = await drainBalances(redis, keys, org, await dirtyCandidates(redis, keys, org, 10));
    expect(drained.balances).toEqual([expect.objectContaining({ used: 40, revision: 5 })]);
  });
});
