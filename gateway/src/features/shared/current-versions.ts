import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';
import type { SnapshotVersions } from '../../metering/contract.ts';

export interface CurrentVersions {
  catalog: number;
  auth: number;
  /** The organization's subscriber-write stamp (0: Redis has none), read with the subscribers' versions. */
  subscriberStamp: number;
  /** By subscriber, in the order asked: the versions an entitlements lookup takes. */
  subscribers: SnapshotVersions[];
}

/**
 * The organization's current snapshot versions, read outside a gate call (usage reports and reads, and a metered
 * operation redone after its versions moved): catalog, auth, the subscribers' and the subscriber-write stamp.
 */
export async function readCurrentVersions(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  subscriberIds: readonly string[],
): Promise<CurrentVersions> {
  const [catalog, auth, indexed] = await Promise.all([
    redis.hget(keys.catalog(organizationId), 'v'),
    redis.hget(keys.auth(organizationId), 'v'),
    redis.hmget(keys.subscriberVersions(organizationId), '#w', ...subscriberIds),
  ]);
  const catalogVersion = Number(catalog ?? 0);
  const subscriberStamp = Number(indexed[0] ?? 0);
  return {
    catalog: catalogVersion,
    auth: Number(auth ?? 0),
    subscriberStamp,
    subscribers: subscriberIds.map((_, i) => ({
      catalog: catalogVersion,
      subscriber: Number(indexed[i + 1] ?? 0),
      auth: Number(auth ?? 0),
      subscriberStamp,
    })),
  };
}
