import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Pool } from 'undici';
import { exemptFromRequestDeadline } from '@ent/common/http/request-deadline';
import { ADMIN_FORWARD_TIMEOUT_MS } from '@ent/common/http/server-options';
import { forwardRequest } from './routes.ts';

/**
 * Uploads forwarded at once: one more waits for a connection (its client's upload held back meanwhile), and the
 * shared pool's connections, every other tenant's writes, are never taken by an upload.
 */
const IMPORT_UPLOADS = 8;

/**
 * `POST /org/imports` through the one base URL: its NDJSON body (up to 1 GiB, DESIGN.md §5) is passed on to admin as it
 * arrives, not read whole under the body limit as other forwarded requests are. Admin stages it line by line and
 * bounds its size; the upload is taken off the 30 s whole-request deadline, as admin does, and still cut off by the
 * socket's idle timeout when it stops coming.
 */
export async function forwardImports(app: FastifyInstance): Promise<void> {
  const uploads = new Pool(app.config.adminUrl, {
    connections: IMPORT_UPLOADS,
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
      exemptFromRequestDeadline(request.raw);
      return forwardRequest(uploads, app.config.internalToken, request, reply, upload);
    },
  );
}
