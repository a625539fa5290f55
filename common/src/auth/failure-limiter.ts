import { isIPv6 } from 'node:net';
import { LRUCache } from 'lru-cache';
import type { Config } from '../config.ts';
import { AppError } from '../errors/app-error.ts';
import { isLoopbackAddress } from '../http/loopback.ts';

interface Bucket {
  tokens: number;
  at: number;
}

/** How many clients' buckets a process keeps; the least recently seen go first (a forgotten client starts full). */
const AUTH_FAILURE_CLIENTS = 50_000;

/** Groups `a:b:c:d:…` by its /64, which one host (or site) usually owns whole; IPv4 (and IPv4-mapped) stay exact. */
export function clientKey(ip: string): string {
  if (ip.startsWith('::ffff:') && ip.includes('.')) return ip.slice(7);
  if (!isIPv6(ip)) return ip;
  const [head = '', tail = ''] = ip.split('::');
  const headParts = head ? head.split(':') : [];
  const tailParts = tail ? tail.split(':') : [];
  const groups = ip.includes('::')
    ? [...headParts, ...Array<string>(8 - headParts.length - tailParts.length).fill('0'), ...tailParts]
    : headParts;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

export const authRateLimited = (retryAfterSeconds: number) =>
  new AppError(
    429,
    'RATE_LIMITED',
    'Too many failed authentications from this address; retry later.',
    undefined,
    {
      'retry-after': String(retryAfterSeconds),
    },
  );

/**
 * Token buckets by key, in a bounded LRU: each holds `capacity` tokens and refills `capacity` per `periodMs`.
 * A key without a bucket is full; one forgotten (least recently used) starts full again.
 */
export class TokenBuckets {
  private readonly buckets: LRUCache<string, Bucket>;
  private readonly perMs: number;

  constructor(
    private readonly capacity: number,
    periodMs: number,
    private readonly now: () => number,
    maxKeys: number,
  ) {
    this.buckets = new LRUCache({ max: maxKeys });
    this.perMs = capacity / periodMs;
  }

  private refilled(key: string): Bucket | undefined {
    const bucket = this.buckets.get(key);
    if (!bucket) return undefined;
    const now = this.now();
    bucket.tokens = Math.min(this.capacity, bucket.tokens + Math.max(0, now - bucket.at) * this.perMs);
    bucket.at = now;
    return bucket;
  }

  /** 0 when the key has a token, else the whole seconds until it has one (for Retry-After). */
  retryAfterSeconds(key: string): number {
    if (this.capacity === 0) return 0;
    const bucket = this.refilled(key);
    if (!bucket || bucket.tokens >= 1) return 0;
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.perMs / 1000));
  }

  take(key: string): void {
    if (this.capacity === 0) return;
    const bucket = this.refilled(key);
    if (bucket) bucket.tokens = Math.max(0, bucket.tokens - 1);
    else this.buckets.set(key, { tokens: this.capacity - 1, at: this.now() });
  }

  /**
   * Takes a token when there is one (0), else says how long until there is. Taken before the work it pays
   * for, so concurrent requests cannot all pass on the same token.
   */
  tryTake(key: string): number {
    const retryAfter = this.retryAfterSeconds(key);
    if (retryAfter === 0) this.take(key);
    return retryAfter;
  }

  /** Gives back a token taken for work that turned out not to count. */
  giveBack(key: string): void {
    if (this.capacity === 0) return;
    const bucket = this.refilled(key);
    if (bucket) bucket.tokens = Math.min(this.capacity, bucket.tokens + 1);
  }
}

/**
 * Failed authentications that cost a lookup, per client address: a token bucket holding `perMinute` failures,
 * refilled at `perMinute` a minute. An empty bucket means no more lookups for unknown keys from that address
 * until it refills; keys the process already knows are still answered. `perMinute` 0 turns the limit off.
 * Clients on this machine (a loopback address: callers pass `failureLimitAddress`, which gives one only to a
 * client every trusted hop of which is local, or at admin the gateway's statement of it) are not limited unless
 * `limitLoopback`: they are the operator's own
 * processes, and a local test run that checks many bad keys must not see the next fresh key refused.
 */
export class AuthFailureLimiter {
  private readonly buckets: TokenBuckets;

  private readonly limitLoopback: boolean;

  constructor(
    config: Pick<Config, 'authFailuresPerMinute' | 'authFailuresLimitLoopback'>,
    now: () => number,
    maxClients = AUTH_FAILURE_CLIENTS,
  ) {
    this.buckets = new TokenBuckets(config.authFailuresPerMinute, 60_000, now, maxClients);
    this.limitLoopback = config.authFailuresLimitLoopback;
  }

  private exempt(ip: string): boolean {
    return !this.limitLoopback && isLoopbackAddress(ip);
  }

  /**
   * Before a lookup: 0 when the address may make it (a token is held for it until `notAFailure`), else the whole
   * seconds until it may (for Retry-After). Held up front, so concurrent lookups cannot share one token.
   */
  beforeLookup(ip: string): number {
    if (this.exempt(ip)) return 0;
    return this.buckets.tryTake(clientKey(ip));
  }

  /** The lookup found a working key: its token goes back (only failures count). */
  notAFailure(ip: string): void {
    if (this.exempt(ip)) return;
    this.buckets.giveBack(clientKey(ip));
  }
}
