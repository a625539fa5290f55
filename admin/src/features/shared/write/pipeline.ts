import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
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

/** Runs first inside the write's transaction, before its work (the Idempotency-Key's reservation). */
export type BeginListener = (trx: Transaction<Database>, request: FastifyRequest) => Promise<void>;

/** What a route answers for its write: the status, and the body unless it is a 204. */
export interface WriteAnswer {
  status: number;
  body?: unknown;
}

/** The answer as sent: the body serialized by the route's response schema, and its content type. */
export interface RenderedAnswer {
  status: number;
  contentType: string | null;
  body: string;
}

/**
 * Runs inside the write's transaction, last, with the answer the route will send and the write's outcome: what must
 * commit exactly when the write does (the Idempotency-Key's record, the audit entry's outcome).
 */
export type AnswerListener = (
  trx: Transaction<Database>,
  request: FastifyRequest,
  answer: RenderedAnswer,
  outcome: WriteOutcome,
) => Promise<void>;

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** A route's serializer answers a string; a custom one may answer bytes. */
const asText = (serialized: string | ArrayBuffer | Buffer): string =>
  typeof serialized === 'string' ? serialized : Buffer.from(serialized as ArrayBuffer).toString('utf8');

export interface WritePipeline {
  onCommitted(listener: CommittedListener): void;
  beforeCommit(listener: BeforeCommitListener): void;
  onBegin(listener: BeginListener): void;
  onAnswer(listener: AnswerListener): void;
  /**
   * The one entry point of every write: `work` runs in one transaction and builds the write's outcome (audit
   * details, domain events, what to publish) through the service it calls; what the outcome causes is committed
   * with it (webhook deliveries) or done after the commit, before the response (snapshot publishing).
   */
  run<T>(
    request: FastifyRequest,
    work: (trx: Transaction<Database>, outcome: WriteOutcome) => Promise<T>,
  ): Promise<T>;
  /**
   * `run`, and the route's answer made from the write's result inside the transaction: the answer listeners
   * keep it with the write (an Idempotency-Key's response commits exactly when the write does), and the same
   * serialized bytes are sent once the committed listeners have run.
   */
  answer<T>(
    request: FastifyRequest,
    reply: FastifyReply,
    work: (trx: Transaction<Database>, outcome: WriteOutcome) => Promise<T>,
    render: (result: T) => WriteAnswer,
    /** What must follow the commit before the answer leaves (start the work the write queued). */
    committed?: (result: T) => void,
  ): Promise<FastifyReply>;
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
    const begin: BeginListener[] = [];
    const answered: AnswerListener[] = [];
    const committed = new WeakMap<FastifyRequest, WriteOutcome>();

    async function execute<T>(
      request: FastifyRequest,
      work: (trx: Transaction<Database>, outcome: WriteOutcome) => Promise<T>,
      respond?: (trx: Transaction<Database>, result: T, outcome: WriteOutcome) => Promise<void>,
    ): Promise<T> {
      let outcome!: WriteOutcome;
      // A deadlock victim is run again (transact): each attempt builds its outcome (and answer) from nothing.
      const result = await transact(app.db, async (trx) => {
        outcome = new WriteOutcome();
        for (const listener of begin) await listener(trx, request);
        const result = await work(trx, outcome);
        for (const listener of beforeCommit) await listener(trx, request, outcome);
        if (respond) await respond(trx, result, outcome);
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
    }

    const pipeline: WritePipeline = {
      onCommitted: (listener) => void listeners.push(listener),
      beforeCommit: (listener) => void beforeCommit.push(listener),
      onBegin: (listener) => void begin.push(listener),
      onAnswer: (listener) => void answered.push(listener),
      run: (request, work) => execute(request, work),
      async answer(request, reply, work, render, committed) {
        let rendered!: RenderedAnswer;
        const result = await execute(request, work, async (trx, result, outcome) => {
          const { status, body } = render(result);
          // The route's response schema for this status serializes the body, as a plain send would.
          reply.code(status);
          rendered =
            status === 204
              ? { status, contentType: null, body: '' }
              : { status, contentType: JSON_CONTENT_TYPE, body: asText(reply.serialize(body)) };
          for (const listener of answered) await listener(trx, request, rendered, outcome);
        });
        committed?.(result);
        reply.code(rendered.status);
        if (rendered.contentType === null) return reply.send();
        return reply.type(rendered.contentType).send(rendered.body);
      },
      outcomeOf: (request) => committed.get(request) ?? null,
    };
    app.decorate('writePipeline', pipeline);
  },
  { name: 'write-pipeline', dependencies: ['infrastructure'] },
);
