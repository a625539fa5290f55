import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Pool } from 'undici';
import { exemptFromRequestDeadline } from '@ent/common/http/request-deadline';
import { ADMIN_FORWARD_TIMEOUT_MS, REQUEST_RECEIVE_TIMEOUT_MS } from '@ent/common/http/server-options';
import { forwardRequest } from './routes.ts';

/**
 * How long an upload may send nothing before its connection is closed: it is off the whole-request deadline, and the
 * gateway's sockets have no idle timeout of their own.
 */
const UPLOAD_IDLE_MS = REQUEST_RECEIVE_TIMEOUT_MS;

/**
 * `POST /org/imports` through the one base URL: its NDJSON body (up to 1 GiB, DESIGN.md §5) is passed on to admin as it
 * arrives, not read whole under the body limit as other forwarded requests are. Admin stages it line by line and
 * bounds its size; the upload is taken off the 30 s whole-request deadline, as admin does, and cut off once it sends
 * nothing for UPLOAD_IDLE_MS.
 */
export async function forwardImports(app: FastifyInstance): Promise<void> {
  // A pool of its own, unbounded: an upload holds its connection to admin while its client sends, so the shared pool
  // (every tenant's writes) is never taken by one, and no number of slow uploads makes another tenant's wait.
  const uploads = new Pool(app.config.adminUrl, {
    connect: { timeout: 2000 },
    headersTimeout: ADMIN_FORWARD_TIMEOUT_MS,
    bodyTimeout: ADMIN_FORWARD_TIMEOUT_MS,
  });
  app.addHook('onClose', async () => uploads.close());

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request: FastifyRequest, payload: Readable, done) => done(null, payload));

  app.post(
    '/org/imports',
    {
      // What admin asks of the key, and admin alone checks it; the query (`dry_run`) and the body (any bytes) are
      // admin's to read too, so the route-wide rules (strict-routes.ts) are given schemas that take anything.
      config: { scope: 'subscribers:write' },
      schema: { querystring: { type: 'object' }, body: {} },
    },
    async (request, reply) => {
      const upload = request.body as Readable | undefined;
      if (upload !== undefined && exemptFromRequestDeadline(request.raw)) {
        const socket = request.raw.socket;
        socket.setTimeout(UPLOAD_IDLE_MS, () => socket.destroy());
        request.raw.once('end', () => socket.setTimeout(0));
      }
      return forwardRequest(uploads, app.config.internalToken, request, reply, upload);
    },
  );
}
