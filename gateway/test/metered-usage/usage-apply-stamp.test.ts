import { describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { meteredOperation, type MeteredOperation } from '../../src/metering/metered-operations.ts';
import { proMeteredCatalog, proSubscriber } from '../../../test-support/metered-documents.ts';
import {
  SEEDED_VERSIONS,
  meteringTestRedis,
  seededOrganizations,
  usageApplyCall,
} from '../../../test-support/metering-redis.ts';

const { keys, redis } = meteringTestRedis();
const clock = new ManualClock(Date.parse('2026-03-10T12:00:00Z'));
const catalog = proMeteredCatalog({ calls: { limit: 10 } });
const organization = seededOrganizations({
  redis,
  keys,
  catalog,
  subscribers: { alice: proSubscriber, bob: proSubscriber },
});

/** A delta of 1 for `subscriberId` at `subscriberVersion`, read at `subscriberStamp` (0: not known). */
const delta = (subscriberId: string, subscriberVersion: number, subscriberStamp: number): MeteredOperation =>
  meteredOperation(
    {
      catalog,
      subscriber: proSubscriber,
      catalogVersion: SEEDED_VERSIONS.catalogVersion,
      subscriberVersion,
      subscriberStamp,
    },
    subscriberId,
    'calls',
    'd',
    1,
    clock.now(),
    '',
    keys,
    'org_unused',
  );

let calls = 0;
const apply = async (org: string, ops: MeteredOperation[]) =>
  usageApplyCall(redis, keys, { org, callId: `stamp-${calls++}`, ops, deadline: Date.now() + 60_000 });

/** A subscriber write as subscriber-put-2.lua makes it: the version and the stamp move together. */
async function moveSubscriber(org: string, subscriberId: string, version: number) {
  await redis.hset(keys.subscriberVersions(org), subscriberId, version);
  await redis.hincrby(keys.subscriberVersions(org), '#w', 1);
}

describe('usage-apply-6.lua and the subscriber-write stamp', () => {
  const seeded = SEEDED_VERSIONS.subscriberVersion;

  it('applies operations read at the stamp the index holds, and any other after reading its version', async () => {
    const org = await organization();
    await redis.hset(keys.subscriberVersions(org), '#w', '700');
    expect(await apply(org, [delta('alice', seeded, 700), delta('bob', seeded, 0)])).toEqual([0, 1, 0, 1]);
    // Bob read at another stamp, with a version the index does not hold: read, and stale.
    expect(await apply(org, [delta('alice', seeded, 700), delta('bob', seeded + 1, 699)])).toEqual([
      0, 2, 2, 0,
    ]);
  });

  it('reads every version again once the stamp moved: an operation on a moved subscriber is stale', async () => {
    const org = await organization();
    await redis.hset(keys.subscriberVersions(org), '#w', '700');
    await moveSubscriber(org, 'alice', seeded + 1);
    expect(await apply(org, [delta('alice', seeded, 700), delta('bob', seeded, 700)])).toEqual([2, 0, 0, 1]);
    expect(await apply(org, [delta('alice', seeded + 1, 701)])).toEqual([0, 1]);
  });

  it('never trusts a stamp the index lacks', async () => {
    const org = await organization();
    await redis.hdel(keys.subscriberVersions(org), '#w');
    await redis.hset(keys.subscriberVersions(org), 'alice', seeded + 1);
    expect(await apply(org, [delta('alice', seeded, 700)])).toEqual([2, 0]);
  });
});
