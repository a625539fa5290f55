import { createHash } from 'node:crypto';
import { clientKey } from '@ent/common/auth/failure-limiter';
import { AppError, serviceUnavailable } from '@ent/common/errors/app-error';
import { withScripts } from '@ent/common/redis/commands';
import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';

/**
 * docs/console-api.md: failures per 15 minutes, 5 per account (email) from one client address, 100 per account
 * from all addresses together, 30 per address whichever accounts it tries. The per-address count of an account
 * comes first, so one attacker's address locks the account only for that address; the account's ceiling still
 * bounds an attacker spread over many addresses, at the price that 20 addresses together can lock it for everyone
 * (SECURITY.md).
 */
const SIGN_IN_FAILURES_PER_ACCOUNT_AND_ADDRESS = 5;
const SIGN_IN_FAILURES_PER_ACCOUNT = 100;
const SIGN_IN_FAILURES_PER_ADDRESS = 30;
const SIGN_IN_WINDOW_MS = 15 * 60 * 1000;

export const signInRateLimited = (retryAfterSeconds: number) =>
  new AppError(429, 'RATE_LIMITED', 'Too many failed sign-ins; retry later.', undefined, {
    'retry-after': String(retryAfterSeconds),
  });

/**
 * Who is trying: the account named (its email, as typed, case aside: one person's memberships share it, so naming
 * an organization or not gives no extra guesses) and the address.
 */
export interface SignInAttempt {
  email: string;
  ip: string;
}

export interface SignInLimiter {
  /**
   * 0 when the attempt may be checked, else the whole seconds until it may (Retry-After). An attempt let through
   * holds a place in each of its counters until it ends: it counts as a failure unless `succeeded` or `abandoned`
   * gives the places back, so concurrent guesses cannot all pass while the first is being checked.
   */
  reserve(attempt: SignInAttempt, nowMs: number): Promise<number>;
  /**
   * A correct password: the account's failures from this address are forgotten, and the attempt's places in the
   * other counts are given back (failures from elsewhere still count towards the account's ceiling).
   */
  succeeded(attempt: SignInAttempt): Promise<void>;
  /** The check never reached a verdict (the database failed): every place is given back. */
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

/** No email reaches Redis, and no character of it can break the key's hash tag. */
const digest = (...parts: string[]): string =>
  createHash('sha256').update(parts.join('\u0000')).digest('hex');
const normalizedEmail = (attempt: SignInAttempt) => attempt.email.trim().toLowerCase();

/**
 * Failed sign-ins counted in Redis (every admin process sees the same counts), each counter a window that opens
 * at its first failure. A place is taken in each before the password is checked (window-take-1.lua: the check and
 * the count in one step), so a limited account or address learns nothing, even from the right password.
 */
export function signInLimiter(redis: RedisClient, keys: RedisKeys): SignInLimiter {
  const scripts = withScripts(redis);
  const keysOf = (attempt: SignInAttempt) => ({
    address: keys.signInAddressFailures(clientKey(attempt.ip)),
    accountFromAddress: keys.signInAccountAddressFailures(
      digest(normalizedEmail(attempt), clientKey(attempt.ip)),
    ),
    account: keys.signInFailures(digest(normalizedEmail(attempt))),
  });
  /** In the order they are taken: a refusal by one gives back the places taken before it. */
  const counters = (attempt: SignInAttempt): { key: string; limit: number }[] => {
    const { address, accountFromAddress, account } = keysOf(attempt);
    return [
      { key: address, limit: SIGN_IN_FAILURES_PER_ADDRESS },
      { key: accountFromAddress, limit: SIGN_IN_FAILURES_PER_ACCOUNT_AND_ADDRESS },
      { key: account, limit: SIGN_IN_FAILURES_PER_ACCOUNT },
    ];
  };
  const giveBack = (keysToGive: string[]) =>
    Promise.all(keysToGive.map((key) => scripts.windowGiveBack(key)));

  return {
    reserve: (attempt, nowMs) =>
      unlessRedisFails(async () => {
        const taken: string[] = [];
        for (const { key, limit } of counters(attempt)) {
          const waitMs = Number(await scripts.windowTake(key, nowMs, SIGN_IN_WINDOW_MS, limit));
          if (waitMs > 0) {
            await giveBack(taken);
            return Math.max(1, Math.ceil(waitMs / 1000));
          }
          taken.push(key);
        }
        return 0;
      }),
    succeeded: (attempt) =>
      unlessRedisFails(async () => {
        const { address, accountFromAddress, account } = keysOf(attempt);
        await Promise.all([redis.del(accountFromAddress), giveBack([address, account])]);
      }),
    abandoned: (attempt) =>
      unlessRedisFails(async () => {
        await giveBack(counters(attempt).map(({ key }) => key));
      }),
  };
}
