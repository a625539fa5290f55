import { isIP } from 'node:net';
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

const RELAYED_BY = 'relayed-by:';

/** The bucket shared by the clients that a proxy at this loopback address relays without being trusted. */
export const relayedBy = (proxyIp: string): string => `${RELAYED_BY}${proxyIp}`;

/**
 * The bucket the failed-lookup limit charges (failure-limiter.ts): the client's address, and for clients behind a
 * proxy on this machine that the settings do not trust, one bucket they share (as if the proxy were the client),
 * never the loopback exemption of this machine's own processes.
 */
export function failureLimitAddress(request: FastifyRequest): string {
  if (isLocalClient(request) || !isLoopbackAddress(request.ip)) return request.ip;
  return relayedBy(request.ip);
}

/**
 * The gateway's `failureLimitAddress` of the client of a request it forwards: admin charges that bucket, since the
 * gateway alone saw whether a proxy it does not trust relayed the client (its `X-Forwarded-For` cannot say so).
 */
export const GATEWAY_FAILURE_LIMIT_HEADER = 'x-gateway-failure-limit-address';

/** A value `failureLimitAddress` gives: an IP address, or `relayed-by:` and one. */
export function isFailureLimitAddress(value: string): boolean {
  return isIP(value) !== 0 || (value.startsWith(RELAYED_BY) && isIP(value.slice(RELAYED_BY.length)) !== 0);
}

/**
 * The bucket of a request that carries no statement from the gateway: a direct peer on this machine is one of its own
 * processes (exempt), any other client is judged by its address, and one relayed to us from a loopback address
 * (a proxy on this machine, trusted or not, or a gateway whose statement is missing) shares that proxy's limited
 * bucket: being relayed by something local never makes a client local.
 */
export function unstatedFailureLimitAddress(request: FastifyRequest): string {
  if (isLocalDirectPeer(request) || !isLoopbackAddress(request.ip)) return request.ip;
  return relayedBy(request.ip);
}
