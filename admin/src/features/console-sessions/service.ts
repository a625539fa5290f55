import type { Kysely, Transaction } from 'kysely';
import { isRole, sessionPrincipal, type Role, type SessionPrincipal } from '@ent/common/auth/scopes';
import {
  csrfTokenOf,
  generateSessionToken,
  hashSessionToken,
  isWellFormedSessionToken,
} from '@ent/common/auth/session-token';
import type { Database } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';
import type { ConsoleSessionBody } from '@ent/contract/console';
import { findLiveSession, insertSession, revokeMemberSessionRows, revokeSessionRow } from './store.ts';

type Db = Kysely<Database> | Transaction<Database>;

/** A session just started: the token goes into the cookie, once; only hashes are stored. */
export interface StartedSession {
  id: string;
  token: string;
  expiresAt: Date;
}

/** A session that lives now, with what the console shows about its member and organization. */
export interface LiveSession {
  id: string;
  organizationId: string;
  memberId: string;
  keyPrefix: string;
  csrfHash: string;
  expiresAt: Date;
  role: Role;
  member: { email: string; name: string | null };
  organization: { name: string; slug: string };
}

export async function startSession(
  db: Db,
  member: { organizationId: string; memberId: string },
  now: Date,
  lifetimeMs: number,
): Promise<StartedSession> {
  const generated = generateSessionToken();
  const session = await insertSession(db, {
    id: newId('ses'),
    organizationId: member.organizationId,
    memberId: member.memberId,
    tokenHash: generated.hash,
    tokenPrefix: generated.prefix,
    csrfHash: generated.csrfHash,
    createdAt: now,
    expiresAt: new Date(now.getTime() + lifetimeMs),
  });
  return { id: session.id, token: generated.token, expiresAt: session.expires_at };
}

/** The live session of a token hash (from a cookie, or a gateway asking), or null: ended, unknown or malformed. */
export async function liveSessionByHash(db: Db, tokenHash: string, now: Date): Promise<LiveSession | null> {
  const row = await findLiveSession(db, tokenHash, now);
  if (!row || row.email === null || !isRole(row.role)) return null;
  return {
    id: row.id,
    organizationId: row.organization_id,
    memberId: row.member_id,
    keyPrefix: row.token_prefix,
    csrfHash: row.csrf_hash,
    expiresAt: row.expires_at,
    role: row.role,
    member: { email: row.email, name: row.name },
    organization: { name: row.organization_name, slug: row.organization_slug },
  };
}

export function liveSession(db: Db, token: string, now: Date): Promise<LiveSession | null> {
  if (!isWellFormedSessionToken(token)) return Promise.resolve(null);
  return liveSessionByHash(db, hashSessionToken(token), now);
}

export const principalOf = (session: LiveSession): SessionPrincipal =>
  sessionPrincipal({
    organizationId: session.organizationId,
    memberId: session.memberId,
    sessionId: session.id,
    keyPrefix: session.keyPrefix,
    role: session.role,
  });

/** What sign-up, sign-in, invite acceptance and GET /console/api/session answer; `token` is the cookie's. */
export const toSessionBody = (session: LiveSession, token: string): ConsoleSessionBody => ({
  member: {
    member_id: session.memberId,
    email: session.member.email,
    name: session.member.name,
    role: session.role,
  },
  organization: session.organization,
  csrf_token: csrfTokenOf(token),
  expires_at: session.expiresAt.toISOString(),
});

export const endSession = (db: Db, sessionId: string, now: Date): Promise<void> =>
  revokeSessionRow(db, sessionId, now);

/**
 * Ends the member's sessions (suspension, removal: all of them; a password change: all but the one that made it).
 * The lookup also checks the member's status, so a suspension wins even for a session this misses.
 */
export const endMemberSessions = (
  db: Db,
  member: { organizationId: string; memberId: string },
  now: Date,
  keep?: string,
): Promise<number> => revokeMemberSessionRows(db, member.organizationId, member.memberId, now, keep);
