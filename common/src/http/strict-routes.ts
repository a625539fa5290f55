import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { NoQuery } from '../schemas/common.ts';

/**
 * Route-wide rules: bodies are JSON; a route that declares no query string accepts none (unknown parameters
 * are a 422, not silently ignored); every /org route must say which scope it needs, so none is left
 * unauthenticated.
 */
export const strictRoutes = fp(
  async function strictRoutes(app: FastifyInstance) {
    // Bodies are JSON only: Fastify's built-in text/plain parser would turn a text body into a 422 about its
    // shape; without it a non-JSON content type is 415 UNSUPPORTED_MEDIA_TYPE (docs/decisions.md).
    app.removeContentTypeParser('text/plain');
    app.addHook('onRoute', (route) => {
      if (route.url.startsWith('/org')) {
        const config = (route.config ?? {}) as { scope?: string };
        if (!config.scope) throw new Error(`route ${route.method} ${route.url} declares no scope`);
        route.schema ??= {};
        route.schema.querystring ??= NoQuery;
      }
    });
  },
  { name: 'strict-routes' },
);
