import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { transact } from '@ent/common/outbox/record';
import { WriteOutcome } from './outcome.ts';

export type AuditService = 'api' | 'identity';

/** Runs after a write has committed and before its response is sent (read-your-writes). */
export type CommittedListener = (request: FastifyRequest, outcome: WriteOutcome) => Promise<void>;

/** Runs inside the write's transaction, after its work: what must commit with the change (webhook deliveries). */
export type BeforeCommitListener = (
  trx: Transaction<Database>,
  request: FastifyRequest,
  outcome: WriteOutcome,
) => Promise<void>;

export interface WritePipeline {
  onCommitted(listener: CommittedListener): void;
  beforeCommit(listener: BeforeCommitListener): void;
  /**
   * The one entry point of every write: `work` runs in one transaction and builds the write's outcome (audit
   * details, domain events, what to publish) through the service it calls; what the outcome causes is committed
   * with it (webhook deliveries) or done after the commit, before the response (snapshot publishing).
   */
  run<T>(
    request: FastifyRequest,
    work: (trx: Transaction<Database>, outcome: WriteOutcome) => Promise<T>,
  ): Promise<T>;
  /** The outcome of the request's committed write; null when it made none. */
  outcomeOf(request: FastifyRequest): WriteOutcome | null;
}

declare module 'fastify' {
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

/**
 * The one write path: a route hands its write to `run`; once it has committed, the committed listeners (snapshot
 * publishing, webhook enqueueing) run before the response leaves, so the next eval anywhere sees the change, and
 * the audit entry's outcome takes the write's details.
 */
export const writePipeline = fp(
  async function writePipeline(app: FastifyInstance) {
    const listeners: CommittedListener[] = [];
    const beforeCommit: BeforeCommitListener[] = [];
    const committed = new WeakMap<FastifyRequest, WriteOutcome>();
    const pipeline: WritePipeline = {
      onCommitted: (listener) => void listeners.push(listener),
      beforeCommit: (listener) => void beforeCommit.push(listener),
      async run(request, work) {
        let outcome!: WriteOutcome;
        // A deadlock victim is run again (transact): each attempt builds its outcome from nothing.
        const result = await transact(app.db, async (trx) => {
          outcome = new WriteOutcome();
          const result = await work(trx, outcome);
          for (const listener of beforeCommit) await listener(trx, request, outcome);
          return result;
        });
        committed.set(request, outcome);
        for (const listener of listeners) {
          try {
            await listener(request, outcome);
          } catch (error) {
            // The write is committed, and so is its outbox entry: the relay delivers what this step could not.
            request.log.error({ err: error }, 'post-commit step failed');
          }
        }
        return result;
      },
      outcomeOf: (request) => committed.get(request) ?? null,
    };
    app.decorate('writePipeline', pipeline);
  },
  { name: 'write-pipeline', dependencies: ['infrastructure'] },
);
