import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { toBase62 } from './base62.ts';

/** The console's session cookie (docs/console-api.md). */
export const SESSION_COOKIE = 'ent_session';
const SESSION_TOKEN_PREFIX = 'ses_';
const SECRET_LENGTH = 43; // 32 random bytes in base62
const TOKEN_PATTERN = new RegExp(`^${SESSION_TOKEN_PREFIX}[0-9A-Za-z]{${SECRET_LENGTH}}$`);
/** Domain separation: the CSRF token is derived from the session token, never equal to any hash that is stored. */
const CSRF_DERIVATION = 'ent-console-csrf\u0000';

export interface GeneratedSessionToken {
  /** The cookie's value; only its hash is stored. */
  token: string;
  /** `ses_` and the first 8 secret characters: the audit log's actor.key_prefix. */
  prefix: string;
  hash: string;
  csrfToken: string;
  csrfHash: string;
}

const sha256Hex = (value: string): string => createHash('sha256').update(value).digest('hex');

export const hashSessionToken = sha256Hex;
const hashCsrfToken = sha256Hex;

/**
 * The session's CSRF token, derived from its token: `GET /console/api/session` can hand it out again without it
 * being stored anywhere in the clear, and it is only as secret as the cookie it protects, which is the point (a
 * cross-site page can make the browser send the cookie, never read it).
 */
export const csrfTokenOf = (sessionToken: string): string =>
  createHash('sha256').update(CSRF_DERIVATION).update(sessionToken).digest('base64url');

export function generateSessionToken(): GeneratedSessionToken {
  const token = `${SESSION_TOKEN_PREFIX}${toBase62(randomBytes(32), SECRET_LENGTH)}`;
  const csrfToken = csrfTokenOf(token);
  return {
    token,
    prefix: token.slice(0, SESSION_TOKEN_PREFIX.length + 8),
    hash: hashSessionToken(token),
    csrfToken,
    csrfHash: hashCsrfToken(csrfToken),
  };
}

/** Offline shape check, so a mangled cookie is refused before any lookup. */
export const isWellFormedSessionToken = (candidate: string): boolean => TOKEN_PATTERN.test(candidate);

/** Constant time: the digests compared are always 32 bytes, whatever the header held. */
export function csrfTokenMatches(given: string | undefined, csrfHash: string): boolean {
  if (given === undefined || given === '') return false;
  const expected = Buffer.from(csrfHash, 'hex');
  const actual = Buffer.from(hashCsrfToken(given), 'hex');
  return expected.length === actual.length && timingSafeEqual(actual, expected);
}

/** The session cookie's value from a Cookie header (the first one when a browser sends several), if any. */
export function sessionTokenFromCookies(header: string | undefined): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const pair = part.trim();
    if (pair.startsWith(`${SESSION_COOKIE}=`)) return pair.slice(SESSION_COOKIE.length + 1);
  }
  return undefined;
}
