import type { FastifyRequest } from 'fastify';
import { isLoopbackAddress } from './loopback.ts';

/**
 * Headers a relaying proxy adds. A request carrying one that the trusted-proxy settings did not read came through
 * a proxy passing someone else along, whatever its socket says (nginx, Envoy and load balancers add some of these).
 */
const RELAY_HEADERS = [
  'x-forwarded-for',
  'forwarded',
  'x-real-ip',
  'via',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-envoy-external-address',
] as const;

const relayed = (request: FastifyRequest): boolean =>
  RELAY_HEADERS.some((name) => request.headers[name] !== undefined);

/** A peer on this machine talking to us directly: nobody in between (not even our own gateway). */
export function isLocalDirectPeer(request: FastifyRequest): boolean {
  return isLoopbackAddress(request.socket.remoteAddress) && !relayed(request);
}

/**
 * A client on this machine, directly or through trusted proxies that are all on this machine too (a local caller
 * through the gateway, at admin). A proxy on this machine that the settings do not trust makes it not local: its
 * clients are elsewhere.
 */
export function isLocalClient(request: FastifyRequest): boolean {
  const hops = request.ips ?? [request.ip];
  if (!isLoopbackAddress(request.socket.remoteAddress) || !hops.every(isLoopbackAddress)) return false;
  return hops.length > 1 || !relayed(request);
}

/**
 * The bucket the failed-lookup limit charges (failure-limiter.ts): the client's address, and for clients behind a
 * proxy on this machine that the settings do not trust, one bucket they share (as if the proxy were the client),
 * never the loopback exemption of this machine's own processes.
 */
export function failureLimitAddress(request: FastifyRequest): string {
  if (isLocalClient(request) || !isLoopbackAddress(request.ip)) return request.ip;
  return `relayed-by:${request.ip}`;
}
