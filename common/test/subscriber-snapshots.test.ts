import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@ent/common/config';
import { createRedis } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import type { SubscriberDoc } from '@ent/common/snapshots/documents';
import { snapshotStore } from '@ent/common/snapshots/store';
import { deleteKeys, testRedisPrefix } from '../../test-support/redis-keys.ts';

const prefix = testRedisPrefix();
const keys = redisKeys(prefix);
const redis = createRedis(loadConfig());
const store = snapshotStore(redis, keys);
const ORG = 'org_subscriber_snapshots';

afterAll(async () => {
  await deleteKeys(redis, `${prefix}:*`);
  redis.disconnect();
});

const doc = (plans: string[]): SubscriberDoc => ({ exists: true, plans, overrides: {} });
const indexed = (subscriberId: string) => redis.hget(keys.subscriberVersions(ORG), subscriberId);

describe('a subscriber snapshot write', () => {
  it('writes the document and its version index together, and never regresses either', async () => {
    expect(await store.putSubscriber(ORG, 'ann', { version: 3, doc: doc(['pro']) })).toBe(true);
    expect(await indexed('ann')).toBe('3');
    expect(await store.readSubscriber(ORG, 'ann')).toEqual({ version: 3, doc: doc(['pro']) });

    expect(await store.putSubscriber(ORG, 'ann', { version: 2, doc: doc(['free']) })).toBe(false);
    expect(await indexed('ann')).toBe('3');
    expect(await store.readSubscriber(ORG, 'ann')).toEqual({ version: 3, doc: doc(['pro']) });

    expect(await store.putSubscriber(ORG, 'ann', { version: 4, doc: doc([]) })).toBe(true);
    expect(await indexed('ann')).toBe('4');
  });

  it('heals an index entry that is missing or behind when the same version is published again', async () => {
    await store.putSubscriber(ORG, 'bob', { version: 5, doc: doc(['pro']) });
    await redis.hdel(keys.subscriberVersions(ORG), 'bob');
    expect(await indexed('bob')).toBeNull();
    expect(await store.putSubscriber(ORG, 'bob', { version: 5, doc: doc(['pro']) })).toBe(false);
    expect(await indexed('bob')).toBe('5');

    await redis.hset(keys.subscriberVersions(ORG), 'bob', '1');
    await store.putSubscriber(ORG, 'bob', { version: 4, doc: doc([]) });
    expect(await indexed('bob')).toBe('5');
    expect(await store.readSubscriber(ORG, 'bob')).toEqual({ version: 5, doc: doc(['pro']) });
  });

  it('keeps one index entry per subscriber, never touching the others', async () => {
    await store.putSubscriber(ORG, 'cy', { version: 1, doc: doc([]) });
    await store.putSubscriber(ORG, 'dee', { version: 9, doc: doc([]) });
    expect(await redis.hmget(keys.subscriberVersions(ORG), 'cy', 'dee', 'nobody')).toEqual(['1', '9', null]);
  });
});
