import type { FastifyInstance, FastifyRequest } from 'fastify';
import { lookUpSession } from '@ent/common/auth/session-lookup';
import type { SessionCredential } from '../../plugins/auth.ts';
import { sessionTokenOf } from './cookie.ts';
import { liveSession, principalOf, type LiveSession } from './service.ts';

/** The live session named by `token` (the cookie's value), from Postgres; the rules are lookUpSession's. */
export function authenticateSession(
  app: FastifyInstance,
  request: FastifyRequest,
  token: string,
): Promise<LiveSession> {
  return lookUpSession(
    token,
    app.authFailureAddress(request),
    app.authFailures,
    (candidate) => liveSession(app.db, candidate, new Date(app.clock.now())),
    (error) => request.log.error({ err: error }, 'session lookup failed'),
  );
}

/** The session cookie as the /org routes' credential (plugins/auth.ts): a principal and the CSRF hash to check. */
export const sessionCredential: SessionCredential = {
  tokenOf: sessionTokenOf,
  async authenticate(app, request, token) {
    const session = await authenticateSession(app, request, token);
    return { principal: principalOf(session), csrfHash: session.csrfHash };
  },
};
