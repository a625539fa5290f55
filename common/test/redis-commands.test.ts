import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@ent/common/config';
import { publishArrangement } from '@ent/common/metering/arrangement';
import { createRedis } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import { snapshotStore } from '@ent/common/snapshots/store';
import { deleteKeys, testRedisPrefix } from '../../test-support/redis-keys.ts';

const config = loadConfig();
const keys = redisKeys(testRedisPrefix());
const clients: ReturnType<typeof createRedis>[] = [];

afterAll(async () => {
  for (const client of clients) {
    await deleteKeys(client, `${keys.catalog('x').split(':')[0]}:*`);
    client.disconnect();
  }
});

describe('the scripts of a client', () => {
  it('are defined when the client is made, so first uses of several scripts in one tick share an auto-pipeline safely', async () => {
    // Before, each script was defined on first use: one defined while an auto-pipeline holding another
    // script's call was still open put the pipeline's replies out of step, and ioredis threw from a nextTick
    // (admin died on the first eval of an organization, which publishes catalog, auth and arrangement at once).
    const redis = createRedis(config);
    clients.push(redis);
    const store = snapshotStore(redis, keys);
    const results = await Promise.all([
      store.putCatalog('org_a', { version: 1, doc: { features: {}, plans: {} } }),
      publishArrangement(redis, keys, 'org_a', { plan: 'free', evalLimit: 10, blocking: true, burstPerSecond: 5, version: 1 }),
      store.putAuthVersion('org_a', 1),
      publishArrangement(redis, keys, 'org_b', { plan: null, evalLimit: null, blocking: false, burstPerSecond: 5, version: 1 }),
    ]);
    expect(results).toEqual([true, true, true, true]);
    expect(typeof (redis as unknown as Record<string, unknown>).evalGateBatch).toBe('function');
  });
});
