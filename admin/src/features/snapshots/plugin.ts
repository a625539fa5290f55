import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { internalAccess } from '../../plugins/internal-access.ts';
import { createSnapshotPublisher, type SnapshotPublisher } from './publisher.ts';
import { internalSnapshotRoutes } from './routes.ts';

declare module 'fastify' {
  interface FastifyInstance {
    snapshots: SnapshotPublisher;
  }
}

/**
 * The snapshot documents of every organization, built from Postgres and published to Redis (`app.snapshots`; the
 * outbox feature publishes each committed write with it), and the internal rebuild routes gateways call on a Redis
 * miss.
 */
export const snapshots = fp(
  async function snapshots(app: FastifyInstance) {
    const publisher = createSnapshotPublisher({
      db: app.db,
      redis: app.redis,
      redisKeys: app.redisKeys,
      onRebuilt: (kind) => app.metrics.snapshotRebuilds.inc({ kind }),
      clock: app.clock,
    });
    app.decorate('snapshots', publisher);

    await app.register(async (internal) => {
      internal.addHook('onRequest', internalAccess(app.config));
      await internal.register(internalSnapshotRoutes, { publisher });
    });
  },
  { name: 'snapshots', dependencies: ['infrastructure', 'admin-metrics'] },
);
