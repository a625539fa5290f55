import { createHash } from 'node:crypto';
import { clientKey } from '@ent/common/auth/failure-limiter';
import { AppError, serviceUnavailable } from '@ent/common/errors/app-error';
import { withScripts } from '@ent/common/redis/commands';
import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';

/** docs/console-api.md: 5 failures per organization and email, 30 per client address, each per 15 minutes. */
export const SIGN_IN_FAILURES_PER_ACCOUNT = 5;
export const SIGN_IN_FAILURES_PER_ADDRESS = 30;
export const SIGN_IN_WINDOW_MS = 15 * 60 * 1000;

export const signInRateLimited = (retryAfterSeconds: number) =>
  new AppError(429, 'RATE_LIMITED', 'Too many failed sign-ins; retry later.', undefined, {
    'retry-after': String(retryAfterSeconds),
  });

/** Who is trying: the account named (organization slug and email, as typed, case aside) and the address. */
export interface SignInAttempt {
  organization: string;
  email: string;
  ip: string;
}

export interface SignInLimiter {
  /** 0 when the attempt may be checked, else the whole seconds until it may (Retry-After). */
  retryAfter(attempt: SignInAttempt, nowMs: number): Promise<number>;
  failed(attempt: SignInAttempt, nowMs: number): Promise<void>;
  /** A correct password: the account's failures are forgotten (the address's are not). */
  succeeded(attempt: SignInAttempt): Promise<void>;
}

/** Without its counters a sign-in could be guessed at freely, so it waits for Redis rather than going unlimited. */
async function unlessRedisFails<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw serviceUnavailable('Sign-in cannot be checked right now; retry shortly.');
  }
}

/** No email or slug reaches Redis, and no character of theirs can break the key's hash tag. */
const accountDigest = ({ organization, email }: SignInAttempt): string =>
  createHash('sha256')
    .update(`${organization.trim().toLowerCase()}\u0000${email.trim().toLowerCase()}`)
    .digest('hex');

/**
 * Failed sign-ins counted in Redis (every admin process sees the same counts), each counter a window that opens
 * at its first failure (window-count-1.lua). Checked before the password is, so a limited account or
 * address learns nothing, even from the right password.
 */
export function signInLimiter(redis: RedisClient, keys: RedisKeys): SignInLimiter {
  const scripts = withScripts(redis);
  const counters = (attempt: SignInAttempt) => [
    { key: keys.signInFailures(accountDigest(attempt)), limit: SIGN_IN_FAILURES_PER_ACCOUNT },
    { key: keys.signInAddressFailures(clientKey(attempt.ip)), limit: SIGN_IN_FAILURES_PER_ADDRESS },
  ];

  async function secondsLeft(key: string, limit: number, nowMs: number): Promise<number> {
    const [count, since] = (await redis.hmget(key, 'count', 'since')).map(Number);
    if (!count || !since || count < limit) return 0;
    const leftMs = since + SIGN_IN_WINDOW_MS - nowMs;
    return leftMs > 0 ? Math.ceil(leftMs / 1000) : 0;
  }

  return {
    retryAfter: (attempt, nowMs) =>
      unlessRedisFails(async () => {
        const waits = await Promise.all(
          counters(attempt).map(({ key, limit }) => secondsLeft(key, limit, nowMs)),
        );
        return Math.max(...waits);
      }),
    failed: (attempt, nowMs) =>
      unlessRedisFails(async () => {
        await Promise.all(
          counters(attempt).map(({ key }) => scripts.windowCount(key, nowMs, SIGN_IN_WINDOW_MS)),
        );
      }),
    succeeded: (attempt) =>
      unlessRedisFails(async () => {
        await redis.del(keys.signInFailures(accountDigest(attempt)));
      }),
  };
}
