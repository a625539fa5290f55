import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { AppError, conflict, validationError } from '@ent/common/errors/app-error';
import { isAuditedRequest } from './pipeline.ts';
import {
  findLiveKey,
  insertAnswered,
  recordResponse,
  reserveKey,
  type RecordedResponse,
  type StoredKey,
} from './idempotency-store.ts';
import { expiredKeyPruner, type ExpiredKeyPruner } from './idempotency-pruner.ts';

const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
const IDEMPOTENT_REPLAYED_HEADER = 'idempotent-replayed';
/** Stripe's and Stigg's window: a key is answered from its first use for 24 hours. */
const KEY_LIFETIME_MS = 24 * 60 * 60 * 1000;
const KEY_FORMAT = /^[\x20-\x7e]{1,255}$/;

interface IdempotencyState {
  key: string;
  /** The key's first use, when it was made before this request: this request is answered from it. */
  stored: StoredKey | null;
  fingerprint: string | null;
  /** This request's write committed the key's reservation; its response completes it. */
  reserved: boolean;
  /** The response was recorded in the write's own transaction (`writePipeline.answer`): nothing is left to record. */
  answered: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    idempotency: IdempotencyState | null;
  }
  interface FastifyContextConfig {
    /**
     * The route reads a body that may take minutes to arrive (an import's upload): its key is looked up again once
     * the body is in, since a first use may have answered meanwhile.
     */
    slowBody?: boolean;
  }
  interface FastifyInstance {
    /** Prunes expired keys after keyed writes' responses (tests wait for it with `settled()`). */
    idempotencyPruner: ExpiredKeyPruner;
  }
}

/** An /org write that carries an Idempotency-Key (checked by the audit log too: a replay records no entry). */
export function isIdempotentReplay(request: FastifyRequest): boolean {
  return request.idempotency?.stored != null;
}

/** A body that is not parsed JSON (a stream a route reads itself): its content is not known before the handler. */
class UnfingerprintableBody extends Error {}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'string' || Buffer.isBuffer(value))
    return typeof value === 'string'
      ? JSON.stringify(value)
      : `"sha256:${createHash('sha256').update(value).digest('hex')}"`;
  if (value !== null && typeof value === 'object') {
    if (typeof (value as { pipe?: unknown }).pipe === 'function') throw new UnfingerprintableBody();
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([name, item]) => `${JSON.stringify(name)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * What "the same request" means (docs/decisions.md): the method, the route, its path parameters and query, the body as
 * parsed JSON with keys sorted (so key order and whitespace do not matter; values do, exactly) and the member
 * acting (another member of the organization reusing a key gets 422, never someone else's response).
 */
function fingerprintOf(request: FastifyRequest): string {
  const principal = request.principal!;
  return createHash('sha256')
    .update(
      canonicalJson({
        method: request.method,
        route: request.routeOptions.url ?? '',
        params: request.params ?? {},
        // A write's query string can change what it does (`POST /org/imports?dry_run=true`).
        query: request.query ?? {},
        body: request.body ?? null,
        member: principal.memberId,
      }),
    )
    .digest('hex');
}

function isKeyedWrite(request: FastifyRequest): boolean {
  return (
    request.method !== 'GET' &&
    request.method !== 'HEAD' &&
    request.method !== 'OPTIONS' &&
    isAuditedRequest(request)
  );
}

function headerKey(request: FastifyRequest): string | null {
  const value = request.headers[IDEMPOTENCY_KEY_HEADER];
  if (value === undefined) return null;
  if (typeof value !== 'string' || !KEY_FORMAT.test(value))
    throw validationError('The Idempotency-Key header must be 1 to 255 printable ASCII characters.', {
      field: 'Idempotency-Key',
    });
  return value;
}

function recordable(reply: FastifyReply, payload: unknown): RecordedResponse {
  // A 204's serialized body and content type are dropped by Fastify as it sends: it is kept without either.
  if (reply.statusCode === 204) return { status: 204, contentType: null, body: '' };
  const contentType = reply.getHeader('content-type');
  return {
    status: reply.statusCode,
    contentType: typeof contentType === 'string' ? contentType : null,
    body: typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : '',
  };
}

/**
 * Idempotency-Key on every write under /org (DESIGN.md §5). The key is looked up after authentication and before
 * the audit entry (a replay is no new request for the log); the body's fingerprint is compared once it is parsed
 * (before validation: the body as the client sent it). A first use reserves the key inside the write's transaction
 * (`writePipeline.onBegin`), so the key commits exactly when the write does, and records the response as it is sent.
 * Registered before the audit plugin: hooks run in registration order.
 */
export const idempotency = fp(
  async function idempotency(app: FastifyInstance) {
    app.decorateRequest('idempotency', null as unknown as IdempotencyState);
    const expiry = (now: Date) => new Date(now.getTime() + KEY_LIFETIME_MS);
    const pruner = expiredKeyPruner(app.db, app.clock, (error) =>
      app.log.error({ err: error }, 'expired idempotency keys not pruned'),
    );
    app.decorate('idempotencyPruner', pruner);
    app.addHook('onClose', () => pruner.close());

    const answeredUse = async (request: FastifyRequest, key: string): Promise<StoredKey | null> => {
      const stored = await findLiveKey(
        app.db,
        request.principal!.organizationId,
        key,
        new Date(app.clock.now()),
      );
      if (stored && stored.responseStatus === null)
        throw conflict('A request with this Idempotency-Key is still running; retry once it has answered.', {
          field: 'Idempotency-Key',
        });
      return stored;
    };

    app.addHook('preParsing', async (request, _reply, payload) => {
      if (!request.principal || !isKeyedWrite(request)) return payload;
      const key = headerKey(request);
      if (key === null) return payload;
      const stored = await answeredUse(request, key);
      request.idempotency = { key, stored, fingerprint: null, reserved: false, answered: false };
      return payload;
    });

    app.addHook('preValidation', async (request, reply) => {
      const state = request.idempotency;
      if (!state) return;
      try {
        state.fingerprint = fingerprintOf(request);
      } catch (error) {
        if (!(error instanceof UnfingerprintableBody)) throw error;
        // Refused rather than keyed on less than the body: a new streamed route must fingerprint its body first.
        throw validationError('This route does not take an Idempotency-Key: its body is streamed.', {
          field: 'Idempotency-Key',
        });
      }
      // Asked again once a slow body is in: a first use of the key may have answered while this one's body arrived
      // (an import's upload takes minutes), and its repeat is answered from it, not refused as still running. Other
      // bodies arrive in the time of the first look-up's answer: no second read on every keyed write.
      if (state.stored === null && request.routeOptions.config.slowBody)
        state.stored = await answeredUse(request, state.key);
      const stored = state.stored;
      if (!stored) return;
      if (stored.fingerprint !== state.fingerprint)
        throw new AppError(
          422,
          'IDEMPOTENCY_KEY_REUSED',
          'This Idempotency-Key was used for another request (method, path, body or member); use a new key.',
          { field: 'Idempotency-Key' },
        );
      reply.code(stored.responseStatus!).header(IDEMPOTENT_REPLAYED_HEADER, 'true');
      if (stored.responseContentType !== null) reply.header('content-type', stored.responseContentType);
      return reply.send(stored.responseStatus === 204 ? undefined : (stored.responseBody ?? ''));
    });

    app.writePipeline.onBegin(async (trx, request) => {
      const state = request.idempotency;
      if (!state || state.stored || state.reserved || state.fingerprint === null) return;
      const now = new Date(app.clock.now());
      const organizationId = request.principal!.organizationId;
      if (!(await reserveKey(trx, organizationId, state.key, state.fingerprint, now, expiry(now))))
        throw conflict('A request with this Idempotency-Key is still running; retry once it has answered.', {
          field: 'Idempotency-Key',
        });
    });

    // Last in the transaction, after the reservation: the key commits holding its response, so no crash between
    // the commit and the send can leave it reserved without one.
    app.writePipeline.onAnswer(async (trx, request, answer) => {
      const state = request.idempotency;
      if (!state || state.stored || state.fingerprint === null) return;
      await recordResponse(trx, request.principal!.organizationId, state.key, answer);
      state.answered = true;
    });

    app.writePipeline.onCommitted(async (request) => {
      if (request.idempotency) request.idempotency.reserved = true;
    });

    app.addHook('onSend', async (request, reply, payload) => {
      const state = request.idempotency;
      if (!state || state.stored || state.fingerprint === null) return payload;
      const organizationId = request.principal!.organizationId;
      const response = recordable(reply, payload);
      const now = new Date(app.clock.now());
      try {
        if (state.answered) {
          // Recorded with the write; a rolled-back write (answered, then refused at COMMIT) kept no key at all.
        } else if (state.reserved) await recordResponse(app.db, organizationId, state.key, response);
        // A success that made no write (nothing to change) is kept as well: its repeat answers the same.
        else if (response.status >= 200 && response.status < 300)
          await insertAnswered(
            app.db,
            organizationId,
            state.key,
            state.fingerprint,
            response,
            now,
            expiry(now),
          );
      } catch (error) {
        request.log.error({ err: error }, 'idempotency key response not recorded');
      }
      return payload;
    });

    // After the response has left: the prune is never on a keyed write's latency path.
    app.addHook('onResponse', async (request) => {
      const state = request.idempotency;
      if (state && !state.stored && state.fingerprint !== null) pruner.poke();
    });
  },
  { name: 'idempotency', dependencies: ['infrastructure', 'write-pipeline', 'authentication'] },
);
