import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { Config } from '@ent/common/config';
import { isLoopbackAddress, isLoopbackHost } from '@ent/common/http/loopback';

/** Digests are always 32 bytes, so timingSafeEqual never throws, whatever bytes or length the header holds. */
const tokenDigest = (token: string): Buffer => createHash('sha256').update(token, 'utf8').digest();

export const INTERNAL_TOKEN_REQUIRED = (host: string) =>
  `INTERNAL_TOKEN must be set when admin listens on a non-loopback address (HOST=${host}): its /internal routes ` +
  "return any tenant's documents. Set the same random INTERNAL_TOKEN (openssl rand -hex 32) for admin and gateways.";

/**
 * Whether a request comes from a gateway (or another of the deployment's own processes): with INTERNAL_TOKEN the
 * caller presents it, without one its socket is on this machine. Throws at startup when admin would listen beyond
 * loopback without a token.
 */
export function internalCaller(
  config: Pick<Config, 'internalToken' | 'host'>,
): (request: FastifyRequest) => boolean {
  const expected = config.internalToken;
  if (!expected && !isLoopbackHost(config.host)) throw new Error(INTERNAL_TOKEN_REQUIRED(config.host));
  const expectedDigest = expected ? tokenDigest(expected) : null;
  return (request) => {
    if (!expectedDigest) return isLoopbackAddress(request.socket.remoteAddress);
    const given = request.headers['x-internal-token'];
    return typeof given === 'string' && timingSafeEqual(tokenDigest(given), expectedDigest);
  };
}

/**
 * The guard of every /internal route, added as an onRequest hook in the routes' own context: only an internal caller
 * passes; anyone else gets the 404 of a route that does not exist.
 */
export function internalAccess(config: Pick<Config, 'internalToken' | 'host'>): onRequestAsyncHookHandler {
  const allowed = internalCaller(config);
  return async (request, reply) => {
    // The same answer as a route that does not exist: nothing tells a prober these routes are here.
    if (!allowed(request)) {
      reply.callNotFound();
      return reply;
    }
  };
}
