import type { FastifyInstance, FastifySchema } from 'fastify';
import type { Registry } from 'prom-client';
import { noRoute } from '../errors/app-error.ts';
import { isLocalDirectPeer } from './local-client.ts';

/** Where the public port's `/metrics` answers: `loopback` (this machine's own direct peers), or `off`. */
export type PublicPortMetrics = 'loopback' | 'off';

/** @fastify/swagger's flag: not part of admin's OpenAPI document (common does not load swagger's types). */
const HIDDEN_FROM_OPENAPI = { hide: true } as FastifySchema;

/**
 * DESIGN.md §4 puts `/metrics` on both public ports; issue 12 keeps metrics from the public. Both hold: the
 * public port answers `/metrics` to a direct peer on this machine (a local scraper, `curl localhost`), and
 * everyone else, including anything relayed by a proxy on this machine, gets the 404 of a route that does not
 * exist. The operations port (operations-app.ts) serves it to whoever can reach that port.
 */
export function servePublicPortMetrics(
  app: FastifyInstance,
  registry: Registry,
  mode: PublicPortMetrics,
): void {
  if (mode === 'off') return;
  app.get('/metrics', { schema: HIDDEN_FROM_OPENAPI }, async (request, reply) => {
    if (!isLocalDirectPeer(request)) throw noRoute(request.method, request.url);
    return reply.type(registry.contentType).send(await registry.metrics());
  });
}
