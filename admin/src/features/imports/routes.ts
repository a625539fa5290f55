import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { AppError } from '@ent/common/errors/app-error';
import { exemptFromRequestDeadline } from '@ent/common/http/request-deadline';
import { newId } from '@ent/common/ids';
import { ErrorBodySchema, commonErrorResponses } from '@ent/contract/common';
import {
  CreateImportQuery,
  ImportAcceptedSchema,
  ImportLineListSchema,
  ImportParams,
  ImportSchema,
  ListImportLinesQuery,
} from '@ent/contract/imports';
import { ReceivedSchema, bodyTooLarge, receiveImport, type Received } from './receive.ts';
import { deleteImport, getImport, insertReceivingImport, listImportLines, startImport } from './service.ts';

const tags = ['imports'];
const NDJSON = 'application/x-ndjson';

/** The staged import a parsed body belongs to: a symbol, so the Idempotency-Key fingerprint sees only the content. */
const STAGED = Symbol('staged import');
type ReceivedBody = Received & { [STAGED]: { importId: string; started: boolean } };

const notNdjson = () =>
  new AppError(415, 'UNSUPPORTED_MEDIA_TYPE', `Send the import as ${NDJSON}, one record a line.`, {
    field: 'content-type',
  });

/** The query string checked as the route's schema would, ahead of the body (a 422 like any validation error). */
function refuseBadQuery(request: FastifyRequest): void {
  const checkQuery = request.getValidationFunction('querystring');
  if (checkQuery && !checkQuery(request.query)) {
    throw Object.assign(new Error('querystring'), {
      validation: checkQuery.errors ?? [],
      validationContext: 'querystring',
    });
  }
}

const stagedOf = (request: FastifyRequest): ReceivedBody[typeof STAGED] | null =>
  (request.body as Partial<ReceivedBody> | undefined)?.[STAGED] ?? null;

export async function importRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { runner } = app.imports;

  // The body is streamed into import_lines as it arrives (receive.ts), after authentication and the audit entry
  // (preParsing hooks): never held whole, and hashed so an Idempotency-Key compares its content.
  app.addContentTypeParser(NDJSON, async (request: FastifyRequest, payload: AsyncIterable<Buffer>) => {
    const principal = request.principal;
    if (!principal) throw new AppError(401, 'UNAUTHENTICATED', 'A valid X-API-Key header is required.');
    const maxBytes = app.imports.maxBytes;
    const declared = Number(request.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBytes) throw bodyTooLarge(maxBytes);
    // Up to 1 GiB streamed and staged takes far longer than the 30 s every request must arrive in: this one is timed
    // by the socket's idle timeout alone (a body that stops coming is still cut off).
    exemptFromRequestDeadline(request.raw);
    const importId = newId('imp');
    await insertReceivingImport(app.db, {
      id: importId,
      organizationId: principal.organizationId,
      memberId: principal.memberId,
      requestId: request.id,
      owner: runner.owner,
      leaseMs: runner.leaseMs,
    });
    try {
      const received = await receiveImport(payload, {
        db: app.imports.stagingDb,
        importId,
        requestId: request.id,
        scopes: principal.scopes,
        leaseMs: runner.leaseMs,
        maxBytes,
      });
      return Object.assign(received, { [STAGED]: { importId, started: false } });
    } catch (error) {
      await deleteImport(app.db, importId).catch((cleanup: unknown) =>
        request.log.error({ err: cleanup }, 'staged import not removed'),
      );
      throw error;
    }
  });

  app.post(
    '/org/imports',
    {
      config: { scope: 'subscribers:write', auditService: 'api', slowBody: true },
      schema: {
        tags,
        summary:
          'Import records from NDJSON (application/x-ndjson), one record a line, upserted by natural key',
        querystring: CreateImportQuery,
        body: ReceivedSchema,
        response: {
          202: ImportAcceptedSchema,
          413: ErrorBodySchema,
          415: ErrorBodySchema,
          ...commonErrorResponses,
        },
      },
      // Refused before a byte of the body is read (after the audit entry): a query string that is wrong (as on every
      // route, an unknown parameter is a 422 whatever the body), then any other content type, with the one to use.
      // Without these, a wrong query waited for the whole upload to be staged, and a body sent as text/plain or
      // without a type was told to send JSON.
      preParsing: async (request, _reply, payload) => {
        refuseBadQuery(request);
        const type = String(request.headers['content-type'] ?? '')
          .split(';')[0]!
          .trim()
          .toLowerCase();
        if (type !== NDJSON) throw notNdjson();
        return payload;
      },
      // No body at all (so nothing staged): refused before the staged body's schema is checked against nothing.
      preValidation: async (request) => {
        if (!stagedOf(request)) throw notNdjson();
      },
      // A body staged for a request that did not start it (an Idempotency-Key replay, a refusal) is removed before
      // the response ends, so a client reading it finds nothing left over.
      onSend: async (request, _reply, payload) => {
        const staged = stagedOf(request);
        if (staged && !staged.started) await deleteImport(app.db, staged.importId);
        return payload;
      },
    },
    async (request, reply) => {
      const staged = stagedOf(request);
      if (!staged) throw notNdjson();
      const body = request.body as ReceivedBody;
      const dryRun = request.query.dry_run ?? false;
      return app.writePipeline.answer(
        request,
        reply,
        async (trx, outcome) => {
          const row = await startImport(trx, staged.importId, {
            sha256: body.sha256,
            dryRun,
            owner: runner.owner,
            leaseMs: runner.leaseMs,
          });
          if (!row) throw new Error(`import ${staged.importId} was no longer receiving`);
          outcome.details = {
            import_id: row.id,
            dry_run: dryRun,
            sha256: body.sha256,
            bytes: body.bytes,
            lines: row.lines,
            refused_lines: row.failed,
          };
          return row;
        },
        (row) => ({ status: 202, body: { import_id: row.id, status: 'running' } }),
        (row) => {
          staged.started = true;
          runner.start(row.id);
          // Not kept with an Idempotency-Key's answer: a replay answers the status and body alone.
          reply.header('location', `/org/imports/${row.id}`);
        },
      );
    },
  );

  app.get(
    '/org/imports/:import_id',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        tags,
        params: ImportParams,
        response: { 200: ImportSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) => getImport(app.db, request.principal!.organizationId, request.params.import_id),
  );

  app.get(
    '/org/imports/:import_id/lines',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        tags,
        params: ImportParams,
        querystring: ListImportLinesQuery,
        response: { 200: ImportLineListSchema, 404: ErrorBodySchema, ...commonErrorResponses },
      },
    },
    async (request) =>
      listImportLines(app.db, request.principal!.organizationId, request.params.import_id, {
        limit: request.query.limit ?? 20,
        startingAfter: request.query.starting_after,
        result: request.query.result,
      }),
  );
}
