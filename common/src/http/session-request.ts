import type { FastifyRequest } from 'fastify';
import { csrfTokenMatches } from '../auth/session-token.ts';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export const isSafeMethod = (method: string): boolean => SAFE_METHODS.has(method);

/** An origin in its serialized form (`scheme://host[:port]`, default port dropped, lower case), or null. */
function serializedOrigin(value: string): string | null {
  try {
    const origin = new URL(value).origin;
    return origin === 'null' ? null : origin;
  } catch {
    return null;
  }
}

/**
 * True when the request states no Origin, or states its own: the scheme and host the client addressed, as the
 * gateway forwards them (X-Forwarded-Proto, X-Forwarded-Host) and Fastify believes them from trusted proxies
 * only. `Origin: null` (a sandboxed or opaque page) is never our own.
 */
export function isOwnOrigin(request: FastifyRequest): boolean {
  const stated = request.headers.origin;
  if (stated === undefined) return true;
  const origin = serializedOrigin(stated);
  return origin !== null && origin === serializedOrigin(`${request.protocol}://${request.host}`);
}

/**
 * Why a cookie-authenticated request may not run (403), or null: a write (any method but GET, HEAD and OPTIONS)
 * must come from our own origin and carry the session's CSRF token in X-CSRF-Token (docs/console-api.md).
 */
export function crossSiteRefusal(request: FastifyRequest, csrfHash: string): string | null {
  if (isSafeMethod(request.method)) return null;
  if (!isOwnOrigin(request)) return 'The request comes from another origin.';
  const header = request.headers['x-csrf-token'];
  const given = Array.isArray(header) ? header[0] : header;
  if (!csrfTokenMatches(given, csrfHash)) {
    return "A session's write needs its CSRF token in the X-CSRF-Token header (from GET /console/api/session).";
  }
  return null;
}
