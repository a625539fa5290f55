import type { FastifyReply, FastifyRequest } from 'fastify';
import type {} from '@fastify/cookie';
import { SESSION_COOKIE, sessionTokenFromCookies } from '@ent/common/auth/session-token';

/**
 * HttpOnly (no script reads it), Secure, SameSite=Strict (no other site's page makes the browser send it), on
 * every path: the /org routes and /console/api both read it.
 */
const ATTRIBUTES = { httpOnly: true, secure: true, sameSite: 'strict', path: '/' } as const;

export const sessionTokenOf = (request: FastifyRequest): string | undefined =>
  sessionTokenFromCookies(request.headers.cookie);

/** Max-Age is what is left of the session's absolute lifetime. */
export function setSessionCookie(reply: FastifyReply, token: string, expiresAt: Date, now: Date): void {
  const maxAge = Math.max(0, Math.floor((expiresAt.getTime() - now.getTime()) / 1000));
  reply.setCookie(SESSION_COOKIE, token, { ...ATTRIBUTES, maxAge });
}

export function clearSessionCookie(reply: FastifyReply): void {
  reply.clearCookie(SESSION_COOKIE, ATTRIBUTES);
}
