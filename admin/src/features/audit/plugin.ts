import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { sql, type Kysely } from 'kysely';
import { createDb } from '@ent/common/db/connect';
import type { Config } from '@ent/common/config';
import type { Database } from '@ent/common/db/database';
import { serviceUnavailable } from '@ent/common/errors/app-error';
import { isRetryableTransactionError } from '@ent/common/outbox/record';
import {
  USER_AGENT_MAX_LENGTH,
  auditEntryIds,
  recordableDetails,
  recordableParam,
  routeTemplate,
} from './entry.ts';
import {
  appendOutcome,
  insertPendingEntry,
  insertSettledEntry,
  type NewAuditEntry,
  type NewAuditOutcome,
} from './store.ts';
import type { WriteOutcome } from '../shared/write/outcome.ts';
import { isAuditedRequest } from '../shared/write/pipeline.ts';
import { isIdempotentReplay } from '../shared/write/idempotency.ts';

/**
 * How long the `pending` insert, and the outcome inserted in a write's transaction, may wait (for a lock, a statement,
 * a connection) before the write gets 503. The connection's bound is 2 s, not 1: a Postgres that is down refuses at
 * once, and a cold connect on a busy machine (the audit pool's first after a start or an idle spell) took over a
 * second once in the suite and refused a write its own pool (3 s) would have made.
 */
const AUDIT_STATEMENT_TIMEOUT_MS = 2000;
const AUDIT_LOCK_TIMEOUT_MS = 1000;
const AUDIT_CONNECT_TIMEOUT_MS = 2000;

interface AuditState {
  /** Made when the request was received: the entry id and its occurred_at. */
  id: string;
  occurredAt: Date;
  /** The committed `pending` entry; null until it is recorded (and when the request is not audited). */
  entry: NewAuditEntry | null;
  outcomeRecorded: boolean;
  /** The outcome went into the write's own transaction (`writePipeline.answer`): it commits when the write does. */
  outcomeInWrite: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Made when first needed (`stateOf`); null before. */
    audit: AuditState | null;
  }
}

/** Its own small pool with short timeouts: a stuck database turns into a quick 503, not a hung write. */
function createAuditDb(config: Config): Kysely<Database> {
  return createDb(config.databaseUrl, {
    max: 10,
    connectionTimeoutMillis: AUDIT_CONNECT_TIMEOUT_MS,
    statementTimeoutMillis: AUDIT_STATEMENT_TIMEOUT_MS,
    lockTimeoutMillis: AUDIT_LOCK_TIMEOUT_MS,
  });
}

function entryFor(request: FastifyRequest, state: AuditState): NewAuditEntry {
  const principal = request.principal!;
  const userAgent = request.headers['user-agent'];
  return {
    id: state.id,
    organizationId: principal.organizationId,
    occurredAt: state.occurredAt,
    requestId: request.id,
    actor: { memberId: principal.memberId, authType: principal.authType, keyPrefix: principal.keyPrefix },
    service: request.routeOptions.config.auditService ?? 'api',
    method: request.method,
    route: routeTemplate(request.routeOptions.url ?? ''),
    params: Object.fromEntries(
      Object.entries((request.params ?? {}) as Record<string, unknown>).map(([k, v]) => [
        k,
        recordableParam(v),
      ]),
    ),
    ip: request.ip,
    userAgent:
      typeof userAgent === 'string' && userAgent !== '' ? userAgent.slice(0, USER_AGENT_MAX_LENGTH) : null,
  };
}

/** A write refused because the log cannot record it (its pending entry or its outcome): nothing of it was executed. */
const auditUnavailable = () =>
  serviceUnavailable(
    'The audit log cannot record this request right now, so it was not executed; retry with backoff.',
  );

/** The outcome of an entry whose request answered `status`; a success keeps what its write changed. */
function outcomeOfAnswer(entry: NewAuditEntry, status: number, write: WriteOutcome | null): NewAuditOutcome {
  const ok = status >= 200 && status < 300;
  return {
    eventId: entry.id,
    organizationId: entry.organizationId,
    outcome: status === 403 ? 'rejected' : 'responded',
    status: status === 403 ? null : status,
    details: ok ? recordableDetails(write?.details ?? null) : null,
  };
}

/**
 * Audit before write (DESIGN.md §2 property 4). After authentication and before the body is even parsed, an
 * audited request's `pending` entry is committed; when that fails the request ends with 503 and its handler
 * never runs. The outcome is appended before the response leaves: `responded` with the status and the
 * details on the outcome of the request's write, or `rejected` for a 403 (a 403 from the authentication hook, which
 * replies before any entry exists, records the entry and its outcome together). A write answered through
 * `writePipeline.answer` (every audited write route) commits its outcome in its own transaction: a database lost
 * between the commit and the send cannot leave a 2xx the log calls pending. Anything else (a refused write, a
 * validation error, the audited read `GET /org/invites`) appends its outcome as it is sent; a process that dies
 * mid-way leaves the entry pending, and the audit-settle job appends `no_response` later.
 */
export const audit = fp(
  async function audit(app: FastifyInstance) {
    const db = createAuditDb(app.config);
    app.addHook('onClose', async () => {
      await db.destroy();
    });
    app.decorateRequest('audit', null as unknown as AuditState);
    const newAuditEntryId = auditEntryIds();

    // Made when first needed: a 403 from the authentication hook (which runs first) ends the request before
    // any later onRequest hook, and is still recorded, as rejected, when it is sent.
    const stateOf = (request: FastifyRequest): AuditState =>
      (request.audit ??= {
        ...newAuditEntryId(app.clock.now()),
        entry: null,
        outcomeRecorded: false,
        outcomeInWrite: false,
      });

    app.addHook('preParsing', async (request, _reply, payload) => {
      // A repeated Idempotency-Key is answered from its first use (or refused): no new request for the log.
      if (!request.principal || !isAuditedRequest(request) || isIdempotentReplay(request)) return payload;
      const state = stateOf(request);
      const entry = entryFor(request, state);
      try {
        await insertPendingEntry(db, entry);
      } catch (error) {
        request.log.error({ err: error }, 'audit log unavailable: the write was refused');
        throw auditUnavailable();
      }
      state.entry = entry;
      return payload;
    });

    // Last in the transaction (after the Idempotency-Key's record): a rolled-back attempt leaves no outcome, and the
    // flag only counts once the pipeline says the write committed.
    app.writePipeline.onAnswer(async (trx, request, answer, write) => {
      const state = request.audit;
      const entry = state?.entry;
      if (!state || !entry) return;
      try {
        // The audit pool's bounds, for this last statement and the commit: a locked log is a quick 503, as for the
        // pending entry, not a write held for the main pool's 10 s.
        await sql`SELECT set_config('lock_timeout', ${`${AUDIT_LOCK_TIMEOUT_MS}ms`}, true),
          set_config('statement_timeout', ${`${AUDIT_STATEMENT_TIMEOUT_MS}ms`}, true)`.execute(trx);
        await appendOutcome(trx, outcomeOfAnswer(entry, answer.status, write));
      } catch (error) {
        if (isRetryableTransactionError(error)) throw error;
        // As for the pending entry: a write the log cannot record is not executed (its transaction rolls back).
        request.log.error(
          { err: error, auditEntryId: entry.id },
          'audit outcome refused: the write was rolled back',
        );
        throw auditUnavailable();
      }
      state.outcomeInWrite = true;
    });

    app.addHook('onSend', async (request, reply, payload) => {
      if (!request.principal || !isAuditedRequest(request)) return payload;
      const state = stateOf(request);
      if (state.outcomeRecorded) return payload;
      state.outcomeRecorded = true;
      if (state.outcomeInWrite && app.writePipeline.outcomeOf(request) !== null) return payload;
      const status = reply.statusCode;
      try {
        if (!state.entry) {
          if (status === 403)
            await insertSettledEntry(db, entryFor(request, state), {
              outcome: 'rejected',
              status: null,
              details: null,
            });
          return payload;
        }
        const outcome = outcomeOfAnswer(state.entry, status, app.writePipeline.outcomeOf(request));
        // A repeat answered from its Idempotency-Key's first use after its entry was made (a slow body: the first
        // answered while it arrived): said, so it never reads as a second write.
        if (isIdempotentReplay(request) && status < 300) outcome.details = { idempotent_replay: true };
        await appendOutcome(db, outcome);
      } catch (error) {
        // The write already happened; the entry stays pending and is settled to no_response later.
        request.log.error({ err: error, auditEntryId: state.entry?.id }, 'audit outcome not recorded');
      }
      return payload;
    });
  },
  { name: 'audit', dependencies: ['infrastructure', 'write-pipeline', 'authentication'] },
);
