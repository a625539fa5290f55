import { serviceUnavailable, unauthenticated } from '../errors/app-error.ts';
import { authRateLimited, type AuthFailureLimiter } from './failure-limiter.ts';
import { isWellFormedSessionToken } from './session-token.ts';

export const sessionEnded = () => unauthenticated('The console session has ended; sign in again.');

/**
 * The one way a console session cookie is checked, by admin (against Postgres) and by the gateway (asking admin):
 * 401 when the token is malformed or `find` knows no live session for it; 429 before any lookup when the client's
 * address is out of failed lookups (the budget unknown API keys spend, so random cookies cost no more than random
 * keys); 503 when `find` fails, which is not the client's failure.
 */
export async function lookUpSession<T>(
  token: string,
  clientIp: string,
  failures: AuthFailureLimiter,
  find: (token: string) => Promise<T | null>,
  onLookupError: (error: unknown) => void = () => {},
): Promise<T> {
  if (!isWellFormedSessionToken(token)) throw sessionEnded();
  const retryAfter = failures.beforeLookup(clientIp);
  if (retryAfter > 0) throw authRateLimited(retryAfter);
  let session: T | null;
  try {
    session = await find(token);
  } catch (error) {
    failures.notAFailure(clientIp);
    onLookupError(error);
    throw serviceUnavailable('Sessions cannot be checked right now; retry with backoff.');
  }
  if (!session) throw sessionEnded();
  failures.notAFailure(clientIp);
  return session;
}
