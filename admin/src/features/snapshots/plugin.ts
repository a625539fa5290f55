import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { QueuePayloads } from '../../jobs/queues.ts';
import type { WriteContext } from '../../plugins/write-pipeline.ts';
import { createSnapshotPublisher, type SnapshotPublisher } from './publisher.ts';
import { internalSnapshotRoutes } from './routes.ts';

const ENQUEUE_WAIT_MS = 250;

declare module 'fastify' {
  interface FastifyInstance {
    snapshots: SnapshotPublisher;
  }
}

/**
 * After every committed write: the changed documents are written through to Redis and announced before the
 * 2xx leaves (read-your-writes on every gateway), and a `snapshots` job rebuilds them again from Postgres
 * (the backstop when the write-through failed). Also serves the internal rebuild routes gateways call on a
 * Redis miss.
 */
export const snapshots = fp(
  async function snapshots(app: FastifyInstance) {
    const publisher = createSnapshotPublisher({
      db: app.db,
      redis: app.redis,
      redisKeys: app.redisKeys,
      onRebuilt: (kind) => app.metrics?.snapshotRebuilds.inc({ kind }),
    });
    app.decorate('snapshots', publisher);

    // While Redis is unreachable BullMQ holds the job and sends it once Redis is back (the catch-up); the
    // write's response waits for that at most ENQUEUE_WAIT_MS.
    const enqueue = (payload: QueuePayloads['snapshots']) =>
      Promise.race([
        app.queues.snapshots.add('snapshots', payload).catch((error: unknown) => {
          app.log.error({ err: error, payload }, 'could not enqueue a snapshot rebuild');
        }),
        new Promise<void>((resolve) => setTimeout(resolve, ENQUEUE_WAIT_MS).unref()),
      ]);

    app.writePipeline.onCommitted(async (request: FastifyRequest, write: WriteContext) => {
      const organizationId = request.principal?.organizationId;
      if (!organizationId) return;
      const steps: Promise<unknown>[] = [];
      if (write.catalogChanged) {
        steps.push(publisher.publishCatalog(organizationId), enqueue({ kind: 'catalog', organizationId }));
      }
      if (write.subscribersChanged.size > 0) {
        steps.push(publisher.publishSubscribers(organizationId, [...write.subscribersChanged]));
        for (const subscriberId of write.subscribersChanged) {
          steps.push(enqueue({ kind: 'subscriber', organizationId, subscriberId }));
        }
      }
      if (write.authChanged) {
        steps.push(publisher.publishAuth(organizationId), enqueue({ kind: 'auth', organizationId }));
      }
      const results = await Promise.allSettled(steps);
      const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
      if (failed) throw failed.reason;
    });

    await app.register(async (internal) => {
      internal.addHook('onRequest', async (request, reply) => {
        const expected = app.config.internalToken;
        if (!expected) return;
        const given = request.headers['x-internal-token'];
        const ok =
          typeof given === 'string' &&
          given.length === expected.length &&
          timingSafeEqual(Buffer.from(given), Buffer.from(expected));
        if (!ok) return reply.code(404).send();
      });
      await internal.register(internalSnapshotRoutes, { publisher });
    });
  },
  { name: 'snapshots', dependencies: ['infrastructure', 'queues', 'write-pipeline'] },
);
