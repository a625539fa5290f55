import type { Server } from 'node:http';
import type { FastifyHttpOptions } from 'fastify';
import type { Config } from '../config.ts';
import { notFound, validationError } from '../errors/app-error.ts';
import { clientErrorHandler } from './client-errors.ts';
import { sendError } from './error-handler.ts';

/**
 * How long admin waits for a request's API key lookup before answering 503: the main pool's own bounds (a 10 s
 * statement timeout) kept writes hanging over 10 s on a paused Postgres, before any audit step ran.
 */
export const KEY_LOOKUP_TIMEOUT_MS = 2000;

/**
 * The slowest admin write that still commits, each step at its own timeout: the key lookup (2 s), the pending audit
 * entry (1 s connect + 2 s statement), the write's transaction (3 s connect + 10.5 s, the client-side bound over the 10 s statement
 * timeout), the post-commit Redis steps (snapshot write and announcement, 1 s command timeout each, with the
 * rebuild enqueue waiting at most 250 ms beside them: 2.25 s counted) and the audit outcome (1 s + 2 s: appended as the
 * response leaves, or, for a write that commits, inside its transaction with the same lock and statement bounds).
 */
export const ADMIN_WRITE_WORST_CASE_MS = KEY_LOOKUP_TIMEOUT_MS + 3000 + 13_500 + 2250 + 3000;

/** How long a client has to send a whole request, headers and body (checked every second). */
export const REQUEST_RECEIVE_TIMEOUT_MS = 30_000;

/**
 * Node's own request timers, given when the server is created: Fastify's `requestTimeout`, set on the server
 * afterwards, left Node checking every 30 s against a 60 s headers timeout, so a request trickled over 70 s was
 * served and a stalled one held its socket for 85 s.
 */
export const nodeRequestTimers = (receiveTimeoutMs: number) => ({
  requestTimeout: receiveTimeoutMs,
  headersTimeout: receiveTimeoutMs,
  connectionsCheckingInterval: Math.min(1000, receiveTimeoutMs),
});

/** Admin cuts off a request still unanswered (no bytes either way) after this: above its slowest write. */
export const ADMIN_SOCKET_TIMEOUT_MS = 25_000;

/**
 * How long the gateway waits for admin's response headers (from the end of the request body) and between body
 * chunks: above admin's own cut-off, so a write that commits is answered by admin, never 503 by the gateway.
 */
export const ADMIN_FORWARD_TIMEOUT_MS = 30_000;

/** Path values (subscriber ids are up to 255 characters) fit, with room for percent-encoding. */
const MAX_PARAM_LENGTH = 1024;

/**
 * Options both services build Fastify with, so a request the router itself refuses (a malformed percent
 * sequence, an over-long path value) still gets SPEC.md's error body instead of Fastify's own.
 */
export function sharedServerOptions(config: Config): FastifyHttpOptions<Server> {
  return {
    bodyLimit: config.bodyLimitBytes,
    // A request not received whole in this (its body trickled, or never finished) is answered 408 and its socket
    // closed (client-errors.ts); Fastify's default, 0, left such sockets open for good.
    requestTimeout: REQUEST_RECEIVE_TIMEOUT_MS,
    http: nodeRequestTimers(REQUEST_RECEIVE_TIMEOUT_MS),
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    ajv: { customOptions: { removeAdditional: false } },
    // While closing, a request that still arrives on an open keep-alive connection is served (with
    // `Connection: close`) rather than refused with Fastify's own 503 body: the listener is already closed,
    // so these are the last requests of connections that were in use, and the drain waits for them anyway.
    return503OnClosing: false,
    clientErrorHandler,
    frameworkErrors: (error, request, reply) => {
      const appError =
        error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? notFound('No resource has an identifier that long.')
          : validationError('The request path is not valid (check its percent-encoding).', {
              field: 'path',
              location: 'path',
            });
      return sendError(request, reply, appError);
    },
  };
}
