import type { FastifyInstance, FastifyRequest } from 'fastify';
import { lookUpSession } from '@ent/common/auth/session-lookup';
import { liveSession, type LiveSession } from './service.ts';

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
