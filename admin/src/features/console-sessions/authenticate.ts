import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authRateLimited } from '@ent/common/auth/failure-limiter';
import { isWellFormedSessionToken } from '@ent/common/auth/session-token';
import { serviceUnavailable, unauthenticated } from '@ent/common/errors/app-error';
import { liveSession, type LiveSession } from './service.ts';

export const sessionEnded = () => unauthenticated('The console session has ended; sign in again.');

/**
 * The live session named by `token` (the cookie's value): 401 when it is malformed, unknown, expired or revoked,
 * or its member is no longer active; 429 before any lookup when the client's address is out of failed lookups
 * (the budget unknown API keys use, so random cookies cost Postgres no more than random keys); 503 when Postgres
 * cannot say.
 */
export async function authenticateSession(
  app: FastifyInstance,
  request: FastifyRequest,
  token: string,
): Promise<LiveSession> {
  if (!isWellFormedSessionToken(token)) throw sessionEnded();
  const retryAfter = app.authFailures.beforeLookup(request.ip);
  if (retryAfter > 0) throw authRateLimited(retryAfter);
  let session: LiveSession | null;
  try {
    session = await liveSession(app.db, token, new Date(app.clock.now()));
  } catch (error) {
    app.authFailures.notAFailure(request.ip); // not the client's failure
    request.log.error({ err: error }, 'session lookup failed');
    throw serviceUnavailable('Sessions cannot be checked right now; retry with backoff.');
  }
  if (!session) throw sessionEnded();
  app.authFailures.notAFailure(request.ip);
  return session;
}
