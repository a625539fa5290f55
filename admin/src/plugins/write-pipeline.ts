import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { transact } from '@ent/common/outbox/record';

export type AuditService = 'api' | 'identity';

/** A change is `{from, to}`; creates name what they created. See SPEC.md "Details by write". */
export type AuditDetails = Record<string, unknown>;

/** A domain event a committed write produced (webhook deliveries are made from these). */
export interface DomainEvent {
  type: string;
  data: Record<string, unknown>;
}

/** What a write handler reports about the change it committed. */
export interface WriteContext {
  /** For the audit entry: null when nothing changed (and for deletes). */
  details: AuditDetails | null;
  /** Features or plans written: the organization's catalog snapshot is published before the 2xx (mustPublish). */
  catalogChanged: boolean;
  /** Subscribers whose snapshot (subscriptions, overrides) is published before the 2xx, as for the catalog. */
  subscribersChanged: Set<string>;
  /** Keys, members or roles written: the organization's keys are published (gateways re-check), as for the catalog. */
  authChanged: boolean;
  /** The write found nothing to change: what it names above is published only if an earlier write left it undone. */
  unchanged: boolean;
  events: DomainEvent[];
  /** Webhook deliveries recorded in the write's transaction for `events`, handed to the worker after the commit. */
  deliveryIds: string[];
  /** True once `events` were recorded inside the write's transaction (writePipeline.transaction). */
  eventsRecorded: boolean;
}

/** Runs after a write has committed and before its 2xx response is sent (read-your-writes). */
export type CommittedListener = (request: FastifyRequest, write: WriteContext) => Promise<void>;

/** Runs inside the write's transaction, after its work: what must commit with the change (webhook deliveries). */
export type BeforeCommitListener = (
  trx: Transaction<Database>,
  request: FastifyRequest,
  write: WriteContext,
) => Promise<void>;

export interface WritePipeline {
  onCommitted(listener: CommittedListener): void;
  beforeCommit(listener: BeforeCommitListener): void;
  /**
   * Runs a write in one transaction together with what it must cause (its webhook deliveries): a handler that
   * reports events does its work here, passing `trx` to its service, and fills `request.write` inside.
   */
  transaction<T>(request: FastifyRequest, work: (trx: Transaction<Database>) => Promise<T>): Promise<T>;
}

declare module 'fastify' {
  interface FastifyRequest {
    write: WriteContext;
  }
  interface FastifyInstance {
    writePipeline: WritePipeline;
  }
  interface FastifyContextConfig {
    /** Audit service of the route; every write under /org and the invite listing are audited. */
    auditService?: AuditService;
    /** Reads that are audited anyway (the invite list returns live links). */
    auditRead?: boolean;
  }
}

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** A request the audit log records: any write under /org, and reads marked `auditRead`. */
export function isAuditedRequest(request: FastifyRequest): boolean {
  const url = request.routeOptions.url ?? '';
  if (!url.startsWith('/org')) return false;
  return !READ_METHODS.has(request.method) || request.routeOptions.config.auditRead === true;
}

const newWriteContext = (): WriteContext => ({
  details: null,
  catalogChanged: false,
  subscribersChanged: new Set(),
  authChanged: false,
  unchanged: false,
  events: [],
  deliveryIds: [],
  eventsRecorded: false,
});

/** What a write must have published before its 2xx (read-your-writes, DESIGN.md §2.1). */
export interface PublishTargets {
  catalog?: boolean;
  subscriber?: string;
  auth?: boolean;
}

/**
 * Marks what `write` must have published before its 2xx, also when it found nothing to change (`changed` false): an
 * identical write just before it (a client retrying a revoke after a timeout) may have committed and not yet
 * published. Such a write publishes only what the outbox still holds undone for (features/snapshots/plugin.ts),
 * so a repeated write costs one query, not a republish.
 */
export function mustPublish(write: WriteContext, changed: boolean, targets: PublishTargets): void {
  if (targets.catalog) write.catalogChanged = true;
  if (targets.subscriber !== undefined) write.subscribersChanged.add(targets.subscriber);
  if (targets.auth) write.authChanged = true;
  if (!changed) write.unchanged = true;
}

/**
 * The one write path: handlers fill `request.write`; after a 2xx the committed listeners (snapshot
 * publishing, webhook events) run before the response leaves, so the next eval anywhere sees the change.
 */
export const writePipeline = fp(
  async function writePipeline(app: FastifyInstance) {
    const listeners: CommittedListener[] = [];
    const beforeCommit: BeforeCommitListener[] = [];
    const pipeline: WritePipeline = {
      onCommitted: (listener) => void listeners.push(listener),
      beforeCommit: (listener) => void beforeCommit.push(listener),
      // A deadlock victim is run again (transact): each attempt reports its change from nothing.
      transaction: (request, work) =>
        transact(app.db, async (trx) => {
          request.write = newWriteContext();
          const result = await work(trx);
          for (const listener of beforeCommit) await listener(trx, request, request.write);
          request.write.eventsRecorded = true;
          return result;
        }),
    };
    app.decorate('writePipeline', pipeline);
    app.decorateRequest('write', null as unknown as WriteContext);
    app.addHook('onRequest', async (request) => {
      request.write = newWriteContext();
    });
    app.addHook('onSend', async (request, reply, payload) => {
      if (READ_METHODS.has(request.method) || reply.statusCode >= 300 || listeners.length === 0)
        return payload;
      for (const listener of listeners) {
        try {
          await listener(request, request.write);
        } catch (error) {
          // The write is committed, and so is its outbox entry: the relay delivers what this step could not.
          request.log.error({ err: error }, 'post-commit step failed');
        }
      }
      return payload;
    });
  },
  { name: 'write-pipeline', dependencies: ['infrastructure'] },
);
