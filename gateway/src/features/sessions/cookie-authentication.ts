import type { FastifyRequest } from 'fastify';
import type { SessionPrincipal } from '@ent/common/auth/scopes';
import { sessionTokenFromCookies } from '@ent/common/auth/session-token';
import { forbidden } from '@ent/common/errors/app-error';
import { failureLimitAddress } from '@ent/common/http/local-client';
import { crossSiteRefusal } from '@ent/common/http/session-request';
import type { KnownKey } from '../../plugins/principals.ts';
import type { Sessions } from './sessions.ts';

/**
 * The console's session token of a request that carries no key: only from the cookie, and only when there is no
 * Authorization header either (a client that sent credentials of another kind is not silently taken for the
 * browser's session).
 */
export const sessionTokenOf = (request: FastifyRequest): string | undefined =>
  request.headers.authorization === undefined ? sessionTokenFromCookies(request.headers.cookie) : undefined;

/**
 * The session behind `token`, checked with admin (401, 429, 503: sessions.ts), then for a write (the POST routes)
 * its origin and CSRF token (403).
 */
export async function authenticateSession(
  sessions: Sessions,
  request: FastifyRequest,
  token: string,
): Promise<KnownKey<SessionPrincipal>> {
  const { known, csrfHash } = await sessions.authenticate(token, failureLimitAddress(request));
  const crossSite = crossSiteRefusal(request, csrfHash);
  if (crossSite) throw forbidden(crossSite);
  return known;
}
