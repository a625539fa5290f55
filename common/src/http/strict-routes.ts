import type { FastifyInstance, preValidationHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { validationError } from '../errors/app-error.ts';
import { NoQuery } from '@ent/contract/common';

/**
 * A route that declares no body takes none: nothing, or `{}`, as clients that always send an object do. Any field
 * is refused like an unknown field of a declared body, so a client never believes `{"reason": ...}` was kept.
 */
const refuseBody: preValidationHookHandler = (request, _reply, done) => {
  const { body } = request;
  if (body === undefined || body === null) return done();
  if (typeof body !== 'object' || Array.isArray(body)) {
    return done(
      validationError('This route takes no body; send none or {}.', { field: 'body', location: 'body' }),
    );
  }
  const [field] = Object.keys(body);
  if (field === undefined) return done();
  done(
    validationError(`${field} is not a known field: this route takes no body.`, { field, location: 'body' }),
  );
};

const QUERY_CHECKED_PREFIXES = ['/org', '/console/api/', '/ofrep/'];

/**
 * Route-wide rules: bodies are JSON; a route that declares no query string accepts none, and one that declares
 * no body takes none (unknown parameters and fields are a 422, not silently ignored); every /org route must say
 * which scope it needs, so none is left unauthenticated.
 */
export const strictRoutes = fp(
  async function strictRoutes(app: FastifyInstance) {
    // Bodies are JSON only: Fastify's built-in text/plain parser would turn a text body into a 422 about its
    // shape; without it a non-JSON content type is 415 UNSUPPORTED_MEDIA_TYPE (docs/decisions.md).
    app.removeContentTypeParser('text/plain');
    app.addHook('onRoute', (route) => {
      // The JSON APIs (the console's and OFREP's too) take only the query parameters they declare, whatever the name.
      if (QUERY_CHECKED_PREFIXES.some((prefix) => route.url.startsWith(prefix))) {
        route.schema ??= {};
        route.schema.querystring ??= NoQuery;
      }
      if (route.url.startsWith('/org')) {
        const config = (route.config ?? {}) as { scope?: string };
        if (!config.scope) throw new Error(`route ${route.method} ${route.url} declares no scope`);
        // GET bodies mean nothing (RFC 9110) and are never read; the eval list is also on the hot path.
        if (route.schema?.body === undefined && ![route.method].flat().includes('GET')) {
          route.preValidation = [...(route.preValidation ? [route.preValidation].flat() : []), refuseBody];
        }
      }
    });
  },
  { name: 'strict-routes' },
);
