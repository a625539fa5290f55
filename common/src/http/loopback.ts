import { isIP } from 'node:net';

const IPV4_LOOPBACK = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** A peer address (socket.remoteAddress) on this machine: 127.0.0.0/8, ::1, or 127.x mapped into IPv6. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const plain = address.toLowerCase().replace(/^::ffff:/, '');
  if (isIP(plain) === 4) return IPV4_LOOPBACK.test(plain);
  return address === '::1' || address === '0:0:0:0:0:0:0:1';
}

/**
 * A listen address (HOST) that only this machine can reach. `localhost` counts; any other name, `0.0.0.0` and
 * `::` do not, since they may be reachable from elsewhere.
 */
export function isLoopbackHost(host: string): boolean {
  const trimmed = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return trimmed === 'localhost' || isLoopbackAddress(trimmed);
}
