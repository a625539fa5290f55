import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@ent/common/config';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import type { SubscriberDoc, Versioned } from '@ent/common/snapshots/documents';
import { snapshotStore } from '@ent/common/snapshots/store';
import { deleteKeys, testRedisPrefix } from '../../../test-support/redis-keys.ts';

const prefix = testRedisPrefix();
const keys = redisKeys(prefix);
const ORG = 'org_bulk';
let redis: RedisClient;

beforeAll(() => {
  redis = createRedis(loadConfig());
});
afterAll(async () => {
  await deleteKeys(redis, `${prefix}:*`);
  redis.disconnect();
});

const doc = (plan: string): SubscriberDoc => ({ exists: true, plans: [plan], overrides: {} });
const at = (version: number, plan: string): Versioned<SubscriberDoc> => ({ version, doc: doc(plan) });
/** One putSubscribers call of the organization with these subscribers' documents: how many it wrote. */
const put = (subscribers: Record<string, Versioned<SubscriberDoc>>) =>
  snapshotStore(redis, keys).putSubscribers(ORG, new Map(Object.entries(subscribers)));
const stamp = async () => Number(await redis.hget(keys.subscriberVersions(ORG), '#w'));
const held = async (id: string) => {
  const [v, stored] = await redis.hmget(keys.subscriber(ORG, id), 'v', 'doc');
  const indexed = await redis.hget(keys.subscriberVersions(ORG), id);
  return {
    version: Number(v),
    plans: stored ? (JSON.parse(stored) as SubscriberDoc).plans : null,
    indexed: Number(indexed),
  };
};

describe('many subscribers in one script call (subscribers-put-n.lua)', () => {
  it("writes each under subscriber-put-2.lua's rule and moves the stamp once per call that changed the index", async () => {
    expect(await put({ a: at(2, 'basic'), b: at(3, 'basic') })).toBe(2);
    expect(await held('a')).toEqual({ version: 2, plans: ['basic'], indexed: 2 });
    expect(await held('b')).toEqual({ version: 3, plans: ['basic'], indexed: 3 });
    const first = await stamp();
    expect(first).toBeGreaterThan(0);

    // The versions Redis holds: nothing written, the stamp stays (gateways keep trusting their entries).
    expect(await put({ a: at(2, 'pro'), b: at(3, 'pro') })).toBe(0);
    expect(await stamp()).toBe(first);

    // An older version never replaces a newer one; a newer one does; one move of the stamp for the call.
    expect(await put({ a: at(1, 'old'), b: at(4, 'pro') })).toBe(1);
    expect(await held('a')).toEqual({ version: 2, plans: ['basic'], indexed: 2 });
    expect(await held('b')).toEqual({ version: 4, plans: ['pro'], indexed: 4 });
    expect(await stamp()).toBe(first + 1);

    // An index entry lost on its own is lifted by a republish of the version Redis holds, and the stamp moves.
    await redis.hdel(keys.subscriberVersions(ORG), 'a');
    expect(await put({ a: at(2, 'basic') })).toBe(0);
    expect(await held('a')).toEqual({ version: 2, plans: ['basic'], indexed: 2 });
    expect(await stamp()).toBe(first + 2);
  });

  it('tells which subscribers Redis holds behind Postgres, by document or by index entry (the reconciler)', async () => {
    const store = snapshotStore(redis, keys);
    await put({ c: at(5, 'basic'), d: at(5, 'basic'), e: at(5, 'basic') });
    await redis.hdel(keys.subscriberVersions(ORG), 'd');
    const behind = await store.subscribersBehind(ORG, [
      { subscriberId: 'c', version: 5 }, // current
      { subscriberId: 'd', version: 5 }, // its index entry lost
      { subscriberId: 'e', version: 6 }, // document behind
      { subscriberId: 'f', version: 1 }, // not in Redis at all
    ]);
    expect(behind).toEqual(['d', 'e', 'f']);
  });
});
