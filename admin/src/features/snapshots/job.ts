import type { JobDefinition } from '../../jobs/processors.ts';
import { createSnapshotPublisher } from './publisher.ts';
import { redisKeys } from '@ent/common/redis/keys';

/**
 * The backstop behind the write-through: rebuilds the named documents from Postgres (never over a newer
 * version) and announces them, which evicts what gateways cached.
 */
export const snapshotsJob: JobDefinition<'snapshots'> = {
  queue: 'snapshots',
  concurrency: 8,
  processor: (deps) => {
    const publisher = createSnapshotPublisher({
      db: deps.db,
      redis: deps.redis,
      redisKeys: redisKeys(deps.config.redisKeyPrefix),
    });
    return async (job) => {
      const payload = job.data;
      switch (payload.kind) {
        case 'catalog':
          await publisher.publishCatalog(payload.organizationId);
          return;
        case 'subscriber':
          await publisher.publishSubscribers(payload.organizationId, [payload.subscriberId]);
          return;
        case 'auth':
          await publisher.publishAuth(payload.organizationId);
          return;
        case 'organization':
          await publisher.publishOrganization(payload.organizationId);
          return;
      }
    };
  },
};
