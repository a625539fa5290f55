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
  /**
   * 0 when the attempt may be checked, else the whole seconds until it may (Retry-After). An attempt let through
   * holds a place in both of its counters until it ends: it counts as a failure unless `succeeded` or `abandoned`
   * gives the places back, so concurrent guesses cannot all pass while the first is being checked.
   */
  reserve(attempt: SignInAttempt, nowMs: number): Promise<number>;
  /** A correct password: the account's failures are forgotten, and the address's place is given back. */
  succeeded(attempt: SignInAttempt): Promise<void>;
  /** The check never reached a verdict (the database failed): both places are given back. */
  abandoned(attempt: SignInAttempt): Promise<void>;
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
 * at its first failure. A place is taken in both before the password is checked (window-take-1.lua: the check and
 * the count in one step), so a limited account or address learns nothing, even from the right password.
 */
export function signInLimiter(redis: RedisClient, keys: RedisKeys): SignInLimiter {
  const scripts = withScripts(redis);
  const accountKey = (attempt: SignInAttempt) => keys.signInFailures(accountDigest(attempt));
  const addressKey = (attempt: SignInAttempt) => keys.signInAddressFailures(clientKey(attempt.ip));
  const take = async (key: string, limit: number, nowMs: number): Promise<number> => {
    const waitMs = Number(await scripts.windowTake(key, nowMs, SIGN_IN_WINDOW_MS, limit));
    return waitMs > 0 ? Math.ceil(waitMs / 1000) : 0;
  };

  return {
    reserve: (attempt, nowMs) =>
      unlessRedisFails(async () => {
        const addressWait = await take(addressKey(attempt), SIGN_IN_FAILURES_PER_ADDRESS, nowMs);
        if (addressWait > 0) return addressWait;
        const accountWait = await take(accountKey(attempt), SIGN_IN_FAILURES_PER_ACCOUNT, nowMs);
        if (accountWait > 0) await scripts.windowGiveBack(addressKey(attempt));
        return accountWait;
      }),
    succeeded: (attempt) =>
      unlessRedisFails(async () => {
        await Promise.all([redis.del(accountKey(attempt)), scripts.windowGiveBack(addressKey(attempt))]);
      }),
    abandoned: (attempt) =>
      unlessRedisFails(async () => {
        await Promise.all([
          scripts.windowGiveBack(accountKey(attempt)),
          scripts.windowGiveBack(addressKey(attempt)),
        ]);
      }),
  };
}
