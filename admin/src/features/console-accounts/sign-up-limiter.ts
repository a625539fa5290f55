import { clientKey } from '@ent/common/auth/failure-limiter';
import { AppError, serviceUnavailable } from '@ent/common/errors/app-error';
import { withScripts } from '@ent/common/redis/commands';
import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';

const SIGN_UP_WINDOW_MS = 60 * 60 * 1000;

const signUpRateLimited = (retryAfterSeconds: number) =>
  new AppError(429, 'RATE_LIMITED', 'Too many sign-ups from this address; retry later.', undefined, {
    'retry-after': String(retryAfterSeconds),
  });

/**
 * Sign-up is the one route anyone may call that makes rows (an organization, a member) and spends a scrypt hash:
 * each client address (IPv6: its /64) may start `perHour` of them per window, which opens at its first sign-up.
 * Counted before the password is hashed, in one step with the check (window-take-1.lua: concurrent sign-ups
 * cannot all pass on the same free place), in Redis so every admin process shares the count; 0 turns sign-up off.
 */
export function signUpLimiter(redis: RedisClient, keys: RedisKeys, perHour: number) {
  const scripts = withScripts(redis);
  return {
    /** Counts the attempt, or throws 429 (with Retry-After) once the address has used its sign-ups. */
    async admit(ip: string, nowMs: number): Promise<void> {
      if (perHour === 0) throw signUpRateLimited(Math.ceil(SIGN_UP_WINDOW_MS / 1000));
      let waitMs: number;
      try {
        waitMs = Number(
          await scripts.windowTake(keys.signUpsFromAddress(clientKey(ip)), nowMs, SIGN_UP_WINDOW_MS, perHour),
        );
      } catch {
        throw serviceUnavailable('Sign-up cannot be checked right now; retry shortly.');
      }
      if (waitMs > 0) throw signUpRateLimited(Math.max(1, Math.ceil(waitMs / 1000)));
    },
  };
}

export type SignUpLimiter = ReturnType<typeof signUpLimiter>;
