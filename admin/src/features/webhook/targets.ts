import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/** Loopback, private, link-local, shared, documentation, multicast and reserved IPv4 ranges (SSRF). */
export const REFUSED_IPV4: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];

/**
 * IPv6 ranges refused even though some sit inside global unicast 2000::/3: transition ranges that tunnel or
 * translate to an IPv4 address (which may be private), and special-purpose ones. Everything outside 2000::/3
 * is refused anyway (loopback, unspecified, IPv4-compatible ::/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48,
 * discard 100::/64, SRv6 5f00::/16, unique local fc00::/7, link-local fe80::/10, site-local fec0::/10,
 * multicast ff00::/8); they are listed too so the refusal does not depend on that rule alone.
 */
export const REFUSED_IPV6: readonly (readonly [string, number])[] = [
  ['::', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 32],
  ['2001:2::', 48],
  ['2001:10::', 28],
  ['2001:20::', 28],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['3fff::', 20],
  ['5f00::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
];

const refusedRanges = new BlockList();
for (const [network, prefix] of REFUSED_IPV4) refusedRanges.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of REFUSED_IPV6) refusedRanges.addSubnet(network, prefix, 'ipv6');
const globalUnicast = new BlockList();
globalUnicast.addSubnet('2000::', 3, 'ipv6');

/** The eight 16-bit groups of an IPv6 address (the URL parser normalises an IPv4 tail to hex). */
function ipv6Groups(address: string): number[] | null {
  let host: string;
  try {
    host = new URL(`http://[${address.replace(/%.*$/, '')}]/`).hostname.slice(1, -1);
  } catch {
    return null;
  }
  const [head = '', tail] = host.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const fill = tail === undefined ? [] : Array.from({ length: 8 - left.length - right.length }, () => '0');
  const groups = [...left, ...fill, ...right].map((group) => parseInt(group, 16));
  return groups.length === 8 && groups.every((group) => group >= 0 && group <= 0xffff) ? groups : null;
}

const ipv4Of = (high: number, low: number) => `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;

/**
 * The IPv4 address an IPv6 address carries, for the forms that reach it: mapped ::ffff:0:0/96 and translated
 * ::ffff:0:0:0/96 (a socket connects to the IPv4 address itself), IPv4-compatible ::/96, NAT64 64:ff9b::/96
 * and 6to4 2002::/16. Null for every other address.
 */
export function embeddedIPv4(address: string): string | null {
  const g = ipv6Groups(address);
  if (!g) return null;
  const zeros = (from: number, to: number) => g.slice(from, to).every((group) => group === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return ipv4Of(g[6]!, g[7]!);
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return ipv4Of(g[6]!, g[7]!);
  if (zeros(0, 6)) return ipv4Of(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return ipv4Of(g[6]!, g[7]!);
  if (g[0] === 0x2002) return ipv4Of(g[1]!, g[2]!);
  return null;
}

/** Whether the IPv6 address is one of the forms whose only meaning is the IPv4 address it carries. */
const isIPv4Alias = (g: number[]) =>
  g.slice(0, 4).every((group) => group === 0) &&
  ((g[4] === 0 && g[5] === 0xffff) || (g[4] === 0xffff && g[5] === 0));

/**
 * True for any address a webhook may not reach unless private targets are allowed. A mapped or translated
 * IPv6 address is judged by its IPv4 address; every other IPv6 address must be global unicast outside the
 * refused ranges. Anything that is not an IP address is refused.
 */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return refusedRanges.check(address, 'ipv4');
  if (family !== 6) return true;
  const groups = ipv6Groups(address);
  if (!groups) return true;
  if (isIPv4Alias(groups)) return isPrivateAddress(ipv4Of(groups[6]!, groups[7]!));
  const canonical = groups.map((group) => group.toString(16)).join(':');
  if (!globalUnicast.check(canonical, 'ipv6')) return true;
  const embedded = embeddedIPv4(canonical);
  if (embedded !== null && isPrivateAddress(embedded)) return true;
  return refusedRanges.check(canonical, 'ipv6');
}

/** Neither the host nor the address is in the message: it reaches `last_error`, which the tenant reads. */
export const TARGET_REFUSED_MESSAGE = 'target address refused (private or loopback or reserved range)';

export class TargetRefusedError extends Error {
  /** For operators' logs only. */
  readonly address: string;
  constructor(address: string) {
    super(TARGET_REFUSED_MESSAGE);
    this.name = 'TargetRefusedError';
    this.address = address;
  }
}

const stripBrackets = (host: string) => host.replace(/^\[|\]$/g, '');

/** Without a caller's signal the check still ends: PUT /org/webhook waits no longer than this. */
const DEFAULT_LOOKUP_TIMEOUT_MS = 5000;

export type ResolveAll = (host: string) => Promise<LookupAddress[]>;

const systemResolveAll: ResolveAll = (host) =>
  new Promise((resolve, reject) =>
    dnsLookup(host, { all: true, verbatim: true }, (error, addresses) =>
      error ? reject(error) : resolve(addresses),
    ),
  );

/**
 * getaddrinfo cannot be cancelled; the caller stops waiting for it when the signal aborts. Under a signal already
 * aborted the work is not started at all (a lookup nobody waits for would fail later as an unhandled rejection).
 */
function untilAborted<T>(start: () => Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  const work = start();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

export interface TargetCheckOptions {
  /** Bounds the DNS lookup; a delivery passes the signal of its whole attempt. */
  signal?: AbortSignal;
  resolveAll?: ResolveAll;
}

/** RFC 6761: every name under `localhost` is loopback, whether or not this machine's resolver knows it yet. */
const LOCALHOST_NAME = /(?:^|\.)localhost\.?$/i;

/** Resolves the URL's host and throws TargetRefusedError when any address it has is refused. */
export async function assertPublicTarget(url: URL, options: TargetCheckOptions = {}): Promise<void> {
  const host = stripBrackets(url.hostname);
  if (LOCALHOST_NAME.test(host)) throw new TargetRefusedError(host);
  const signal = options.signal ?? AbortSignal.timeout(DEFAULT_LOOKUP_TIMEOUT_MS);
  const addresses = isIP(host)
    ? [{ address: host, family: isIP(host) }]
    : await untilAborted(() => (options.resolveAll ?? systemResolveAll)(host), signal);
  const refused = addresses.find((entry) => isPrivateAddress(entry.address));
  if (refused) throw new TargetRefusedError(refused.address);
}

const IPV4_WITH_PORT = /\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b/g;
const IPV6_WITH_PORT =
  /(?<![\w.:])\[?(?:[0-9a-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9a-f]{0,4})(?:%\w+)?\]?(?::\d{1,5})?/gi;

/** A connection error as the tenant may read it: every IP address (and its port) replaced. */
export const withoutAddresses = (message: string): string =>
  message.replace(IPV6_WITH_PORT, '<address>').replace(IPV4_WITH_PORT, '<address>');

/**
 * The DNS lookup the delivery connection uses: the same check at connect time, so a name that resolved to a
 * public address during the check cannot be rebound to a private one for the request.
 */
export const publicOnlyLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, '', 0);
    const list = addresses as LookupAddress[];
    const refused = list.find((entry) => isPrivateAddress(entry.address));
    if (refused) return callback(new TargetRefusedError(refused.address), '', 0);
    if ((options as { all?: boolean }).all)
      return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
    const first = list[0];
    if (!first) return callback(new Error(`no address for ${hostname}`), '', 0);
    return callback(null, first.address, first.family);
  });
};
