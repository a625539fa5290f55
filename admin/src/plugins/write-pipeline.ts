import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

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
  /** Features or plans changed: the organization's catalog snapshot must be republished. */
  catalogChanged: boolean;
  /** Subscribers whose snapshot (subscriptions, overrides) must be republished. */
  subscribersChanged: Set<string>;
  /** Keys, members or roles changed: gateways must re-check cached keys. */
  authChanged: boolean;
  events: DomainEvent[];
}

/** Runs after a write has committed and before its 2xx response is sent (read-your-writes). */
export type CommittedListener = (request: FastifyRequest, write: WriteContext) => Promise<void>;

declare module 'fastify' {
  interface FastifyRequest {
    write: WriteContext;
  }
  interface FastifyInstance {
    writePipeline: { onCommitted(listener: CommittedListener): void };
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
  events: [],
});

/**
 * The one write path: handlers fill `request.write`; after a 2xx the committed listeners (snapshot
 * publishing, webhook events) run before the response leaves, so the next eval anywhere sees the change.
 */
export const writePipeline = fp(
  async function writePipeline(app: FastifyInstance) {
    const listeners: CommittedListener[] = [];
    app.decorate('writePipeline', { onCommitted: (listener: CommittedListener) => void listeners.push(listener) });
    app.decorateRequest('write', null as unknown as WriteContext);
    app.addHook('onRequest', async (request) => {
      request.write = newWriteContext();
    });
    app.addHook('onSend', async (request, reply, payload) => {
      if (READ_METHODS.has(request.method) || reply.statusCode >= 300 || listeners.length === 0) return payload;
      for (const listener of listeners) {
        try {
          await listener(request, request.write);
        } catch (error) {
          // The write is committed; the rebuild job is the backstop for a failed publish.
          request.log.error({ err: error }, 'post-commit step failed');
        }
      }
      return payload;
    });
  },
  { name: 'write-pipeline' },
);
