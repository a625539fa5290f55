import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sessionEnded } from '@ent/common/auth/session-lookup';
import { AppError, forbidden } from '@ent/common/errors/app-error';
import { crossSiteRefusal } from '@ent/common/http/session-request';
import type { ConsoleSessionBody } from '@ent/contract/console';
import { authenticateSession } from '../console-sessions/authenticate.ts';
import { clearSessionCookie, sessionTokenOf, setSessionCookie } from '../console-sessions/cookie.ts';
import { endSession, toSessionBody, type LiveSession } from '../console-sessions/service.ts';
import type { SignedIn } from './service.ts';

/**
 * The console's session as the /console/api routes see it: read from the cookie, checked for a write, set once
 * someone signed in and ended on sign-out. The one place of this feature that reaches the console-sessions
 * feature, so the routes speak only HTTP.
 */

/** The live session of the request's cookie and its token (401 without one). */
async function currentSession(
  app: FastifyInstance,
  request: FastifyRequest,
): Promise<{ session: LiveSession; token: string }> {
  const token = sessionTokenOf(request);
  if (token === undefined) throw sessionEnded();
  return { session: await authenticateSession(app, request, token), token };
}

/** A write on the current session: 403 (and nothing runs) without its CSRF token. */
export async function sessionForWrite(app: FastifyInstance, request: FastifyRequest): Promise<LiveSession> {
  const { session } = await currentSession(app, request);
  const refusal = crossSiteRefusal(request, session.csrfHash);
  if (refusal) throw forbidden(refusal);
  return session;
}

/** GET /console/api/session: the current session as the console reads it. */
export async function currentSessionBody(
  app: FastifyInstance,
  request: FastifyRequest,
): Promise<ConsoleSessionBody> {
  const { session, token } = await currentSession(app, request);
  return toSessionBody(session, token);
}

/** The new session's cookie, and its body for the answer. */
export function signedInBody(reply: FastifyReply, signedIn: SignedIn, now: Date): ConsoleSessionBody {
  setSessionCookie(reply, signedIn.token, signedIn.session.expiresAt, now);
  return toSessionBody(signedIn.session, signedIn.token);
}

/** Ends the current session and clears its cookie; a session that already ended just has its cookie cleared. */
export async function signOut(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, now: Date) {
  let session: LiveSession | null = null;
  try {
    session = await sessionForWrite(app, request);
  } catch (error) {
    if (!(error instanceof AppError && error.status === 401)) throw error;
  }
  if (session) await endSession(app.db, session.id, now);
  clearSessionCookie(reply);
}
