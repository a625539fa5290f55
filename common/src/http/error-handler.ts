import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { AppError, noRoute, notFound, validationError } from '../errors/app-error.ts';
import { payloadTooLarge } from './body-over-limit.ts';
import { addJsonBodyParser } from './json-body.ts';
import { lingerBeforeClosing } from './lingering-close.ts';
import { describeValidationError } from './validation.ts';

interface PgError {
  code?: string;
  constraint?: string;
}

// Connection-level failures (socket errors, Postgres shutting down, unreachable or not answering in time, pool
// timeouts, a statement cancelled by its timeout). A paused Postgres shows up as node-postgres's own read timeout
// and then as a client "not queryable" on the rollback: both mean the database is unavailable (503), not a bug.
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  '57014',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08006',
]);
const CONNECTION_MESSAGES = [
  /Connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /Connection is closed/i,
  /Query read timeout/i,
  /is not queryable/i,
];

function isConnectionFailure(error: Error): boolean {
  const code = (error as PgError).code;
  if (code && CONNECTION_CODES.has(code)) return true;
  return CONNECTION_MESSAGES.some((pattern) => pattern.test(error.message));
}

/** Maps anything thrown in a route to SPEC.md's error body; the only place error bodies are shaped. */
export function toAppError(error: FastifyError | AppError | Error): AppError {
  if (error instanceof AppError) return error;
  const fastifyError = error as FastifyError;
  if (fastifyError.validation && fastifyError.validation.length > 0) {
    const part = fastifyError.validationContext ?? 'body';
    const { field, message } = describeValidationError(fastifyError.validation as never, part);
    // An id in the path that is empty or longer than any id can be names nothing: 404, as for any unknown id
    // (SPEC.md part 7), and as the router answers a path value over its own bound (server-options.ts).
    const { keyword, params } = fastifyError.validation[0]!;
    if (part === 'params' && (keyword === 'maxLength' || keyword === 'minLength')) {
      const length =
        keyword === 'minLength' ? 'empty' : `over ${(params as { limit?: number }).limit} characters long`;
      return notFound(`No ${field} is ${length}.`, { field });
    }
    const details: Record<string, unknown> = { field, location: part };
    return validationError(message, details);
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return validationError('The request body is not valid JSON.', { field: 'body' });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return payloadTooLarge();
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Send the body as application/json.');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return validationError('Content-Length does not match the body.', { field: 'body' });
  }
  if (error instanceof SyntaxError && fastifyError.statusCode === 400) {
    return validationError('The request body is not valid JSON.', { field: 'body' });
  }
  const pg = error as PgError;
  // The client closed the connection mid-body (Fastify's parser: 400, ECONNRESET "aborted"): nobody waits for an
  // answer, and it is no backing service's failure (a 503 would log an error for every client that gives up).
  if (fastifyError.statusCode === 400 && error.message === 'aborted') {
    return new AppError(
      400,
      'BAD_REQUEST',
      'The client closed the connection before the request arrived whole.',
    );
  }
  if (isConnectionFailure(error)) {
    return new AppError(
      503,
      'SERVICE_UNAVAILABLE',
      'A backing service is unreachable right now; retry with backoff.',
    );
  }
  if (pg.code === '23505')
    return new AppError(409, 'CONFLICT', 'A resource with that identifier already exists.');
  if (pg.code === '22P02' || pg.code === '22003' || pg.code === '23514') {
    return validationError('A value is out of range or malformed.');
  }
  if (fastifyError.statusCode && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
    return validationError(fastifyError.message);
  }
  return new AppError(500, 'INTERNAL_ERROR', 'An internal error occurred; quote the request_id to support.');
}

export function sendError(request: FastifyRequest, reply: FastifyReply, appError: AppError): FastifyReply {
  return (
    reply
      .code(appError.status)
      // Also set by the onRequest hook; not yet when the router refused the request before any hook ran.
      .header('x-request-id', request.id)
      .headers(appError.headers)
      .type('application/json; charset=utf-8')
      .send(appError.toBody(request.id))
  );
}

export const errorHandling = fp(
  async function errorHandling(app: FastifyInstance) {
    // Both services register this plugin first: hostile bodies are refused with the error body before any
    // route (or any recursive walk over the body) sees them.
    addJsonBodyParser(app);
    app.setErrorHandler((error: Error, request, reply) => {
      const appError = toAppError(error);
      if (appError.status >= 500) request.log.error({ err: error }, 'request failed');
      // Refused before its body arrived whole (413), on a connection Fastify closes: the client reads the answer.
      if (!request.raw.complete && reply.getHeader('connection') === 'close')
        lingerBeforeClosing(request.raw);
      return sendError(request, reply, appError);
    });
    app.setNotFoundHandler((request, reply) =>
      sendError(request, reply, noRoute(request.method, request.url)),
    );
    // A callback hook (no promise per request): every response, errors included, carries the id.
    app.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id);
      done();
    });
  },
  { name: 'error-handling' },
);
