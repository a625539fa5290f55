import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { WriteOutcome } from '../shared/write/outcome.ts';
import { createRelayFollowUp, defaultRelayFollowUp, type RelayFollowUpOptions } from './follow-up.ts';
import { createOutboxRelay } from './relay.ts';
import { makeAllDue, outboxLag, undoneOf } from './store.ts';

/**
 * After every committed write: the changed documents are written through to Redis and announced before the
 * 2xx leaves (read-your-writes on every gateway). The write's own transaction recorded them in the outbox
 * (features/shared/versions.ts); a successful publish marks those entries done, and the outbox relay publishes
 * whatever this fast path could not (Redis down, admin killed after the commit).
 */
export interface OutboxOptions {
  /** Admin's own relay passes after an undelivered write-through; false leaves them to the worker (tests of the relay). */
  relayFollowUp?: RelayFollowUpOptions | false;
}

export const outbox = fp<OutboxOptions>(
  async function outbox(app: FastifyInstance, options) {
    const publisher = app.snapshots;
    const relay = createOutboxRelay({ db: app.db, publisher });
    const followUpOptions = options.relayFollowUp ?? defaultRelayFollowUp;
    const followUp =
      followUpOptions === false
        ? null
        : createRelayFollowUp(
            {
              relay,
              undone: async () => (await outboxLag(app.db)).undone,
              redisReady: () => app.redis.status === 'ready',
              log: app.log,
            },
            followUpOptions,
          );
    app.addHook('onClose', async () => followUp?.close());

    /**
     * What the write names, all of it when it changed something; when it changed nothing, only what an earlier
     * write's undone outbox entry says is not yet published (all of it, should the outbox not answer).
     */
    async function stillToPublish(organizationId: string, write: WriteOutcome) {
      const named = {
        catalog: write.catalogChanged,
        subscribers: [...write.subscribersChanged],
        auth: write.authChanged,
      };
      if (!write.unchanged) return named;
      const undone = await undoneOf(app.db, organizationId, named.subscribers).catch(() => null);
      if (!undone) return named;
      return {
        catalog: named.catalog && undone.kinds.has('catalog'),
        subscribers: named.subscribers.filter((id) => undone.subscribers.has(id)),
        auth: named.auth && undone.kinds.has('auth'),
      };
    }

    app.writePipeline.onCommitted(async (request: FastifyRequest, write: WriteOutcome) => {
      const organizationId = request.principal?.organizationId;
      if (!organizationId) return;
      const undelivered = write.catalogChanged || write.subscribersChanged.size > 0 || write.authChanged;
      // Redis unreachable: every publish would wait for its command timeout; the relay will do it.
      if (app.redis.status !== 'ready') {
        if (undelivered) followUp?.schedule();
        return;
      }
      const { catalog, subscribers, auth } = await stillToPublish(organizationId, write);
      const steps: Promise<unknown>[] = [];
      if (catalog) steps.push(publisher.publishCatalog(organizationId));
      if (subscribers.length > 0) steps.push(publisher.publishSubscribers(organizationId, subscribers));
      if (auth) steps.push(publisher.publishAuth(organizationId));
      const results = await Promise.allSettled(steps);
      const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
      if (failed) {
        followUp?.schedule();
        throw failed.reason;
      }
    });

    // Relay passes as admin starts listening: what an admin killed after a commit left undone is published now,
    // not only once a worker runs, and again while some is left. Entries leased by a relay pass that was under way
    // (an admin killed mid-publish) are made due first: their lease would otherwise hold a revocation back for up
    // to its 30 s, and publishing an entry twice costs only the work. Not awaited: admin answers meanwhile.
    app.addHook('onListen', async () => {
      void makeAllDue(app.db)
        .catch((error: unknown) => app.log.warn({ err: error }, 'outbox entries not made due at start'))
        .then(() => {
          if (followUp) followUp.schedule(0);
          else return relay.drainOnce();
        })
        .catch((error: unknown) => app.log.warn({ err: error }, 'outbox relay pass at start failed'));
    });
  },
  { name: 'outbox', dependencies: ['infrastructure', 'write-pipeline', 'snapshots'] },
);
