import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { Pool } from 'undici';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { noRoute, serviceUnavailable } from '@ent/common/errors/app-error';
import { BODY_OVER_LIMIT_HEADER } from '@ent/common/http/body-over-limit';
import { lingerBeforeClosing } from '@ent/common/http/lingering-close';
import { ADMIN_FORWARD_TIMEOUT_MS } from '@ent/common/http/server-options';
import { isSafeMethod } from '@ent/common/http/session-request';
import { GATEWAY_FAILURE_LIMIT_HEADER, failureLimitAddress } from '@ent/common/http/local-client';

/** RFC 9110 §7.6.1 connection-specific headers, plus what the proxy sets itself. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'expect',
]);

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

function requestHeaders(request: FastifyRequest, internalToken: string): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  const connectionListed = new Set(
    String(request.headers.connection ?? '')
      .split(',')
      .map((name) => name.trim().toLowerCase())
      .filter(Boolean),
  );
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || connectionListed.has(name)) continue;
    headers[name] = value;
  }
  // Replaced, not appended: a client's own X-Forwarded-For must not reach admin (the audit log's `ip`).
  // request.ip honours GATEWAY_TRUSTED_PROXIES, so a load balancer in front can still name the client.
  headers['x-forwarded-for'] = request.ip;
  if (request.headers.host) headers['x-forwarded-host'] = request.headers.host;
  headers['x-forwarded-proto'] = request.protocol;
  headers['x-request-id'] = request.id;
  // What this gateway decided about the client for the failed-lookup limit, which admin's key and session lookups
  // then charge; a client's own value is replaced, and the token (never a client's) makes admin believe it.
  headers[GATEWAY_FAILURE_LIMIT_HEADER] = failureLimitAddress(request);
  if (internalToken) headers['x-internal-token'] = internalToken;
  else delete headers['x-internal-token'];
  delete headers[BODY_OVER_LIMIT_HEADER];
  return headers;
}

function responseHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** Failures before admin could have received the request: nothing ran. */
const NOT_SENT = new Set([
  'ECONNREFUSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/**
 * A write whose connection to admin broke after it was sent may have committed (admin killed between its
 * commit and its answer): the 503 says so in `details.outcome`, and its audit entry ends `no_response`.
 * One that never reached admin did not run, like every other 503.
 */
function forwardFailed(request: FastifyRequest, error: unknown) {
  const code = (error as { code?: string }).code ?? '';
  if (NOT_SENT.has(code) || isSafeMethod(request.method)) {
    return serviceUnavailable('The service is temporarily unavailable; retry shortly.');
  }
  return serviceUnavailable(
    'The service stopped answering while handling this request; it may or may not have been applied. ' +
      'Read the resource (or its audit entry, by request id) before retrying.',
    { outcome: 'unknown' },
  );
}

/**
 * Asks admin `request` through `pool` and answers with admin's response, streamed. `body`: the request's body (read
 * whole, or a stream passed on as it arrives), or 'over-limit' when it was over the limit and is left out (admin
 * answers 413, after its audit entry).
 */
export async function forwardRequest(
  pool: Pool,
  internalToken: string,
  request: FastifyRequest,
  reply: FastifyReply,
  body: Buffer | Readable | undefined | 'over-limit',
): Promise<FastifyReply> {
  const headers = requestHeaders(request, internalToken);
  if (body === 'over-limit') {
    delete headers['content-length'];
    headers[BODY_OVER_LIMIT_HEADER] = '1';
  }
  let response;
  try {
    response = await pool.request({
      method: request.method as 'GET',
      path: request.url,
      headers,
      body: body === 'over-limit' ? undefined : body,
      // Longer than admin's slowest write, so one that commits is answered by admin, not 503 here.
      headersTimeout: ADMIN_FORWARD_TIMEOUT_MS,
      bodyTimeout: ADMIN_FORWARD_TIMEOUT_MS,
    });
  } catch (error) {
    request.log.warn({ err: error }, 'admin unreachable');
    throw forwardFailed(request, error);
  }
  reply.code(response.statusCode).headers(responseHeaders(response.headers));
  // Answered before the client's body arrived whole (over the limit, or a streamed upload refused by admin at its
  // start: 401, 403, 413, 415, 422): the rest would never be read, so the connection closes after the answer, the
  // rest read and dropped meanwhile (the connection could not carry another request anyway).
  if ((body instanceof Readable || body === 'over-limit') && !request.raw.complete) {
    reply.header('connection', 'close');
    lingerBeforeClosing(request.raw);
  }
  return reply.send(response.body);
}

/**
 * One base URL: every route the gateway does not answer itself is forwarded to admin with the shared undici
 * Pool. A request body is read whole (within the body limit: 413 here, whether announced or chunked) before
 * admin is asked, so a client trickling its upload holds only its own socket, never one of the pool's
 * connections to admin (a hundred slow uploads would otherwise starve every tenant's writes), and one that never
 * finishes it is cut off by the server's request timeout (408) without reaching admin. Responses are streamed.
 * Registered in its own context so its body parser applies to forwarded requests only.
 */
export async function forwardToAdmin(app: FastifyInstance): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  // A body over the limit is still a request admin answers (and its audit log records): sent on without the body.
  // Anything else, and a failure to reach admin, goes to the service's own error handler.
  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    const forwarded = request.routeOptions.url === '/*' && request.url.startsWith('/');
    if (error.code !== 'FST_ERR_CTP_BODY_TOO_LARGE' || !forwarded) throw error;
    return forwardRequest(app.adminPool, app.config.internalToken, request, reply, 'over-limit');
  });

  app.route({
    method: METHODS,
    url: '/internal/*',
    handler: async (request) => {
      throw noRoute(request.method, request.url);
    },
  });

  app.route({
    method: METHODS,
    url: '/*',
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      // The asterisk form (`OPTIONS *`) names no resource here: no route, not an admin outage.
      if (!request.url.startsWith('/')) throw noRoute(request.method, request.url);
      const body = request.body instanceof Buffer && request.body.length > 0 ? request.body : undefined;
      return forwardRequest(app.adminPool, app.config.internalToken, request, reply, body);
    },
  });
}
