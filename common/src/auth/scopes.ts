import { ROLE_RANK, ROLE_SCOPES, ROLES, SCOPES, type Role, type Scope } from '@ent/contract/scopes';

export { ROLE_RANK, ROLE_SCOPES, ROLES, SCOPES, type Role, type Scope } from '@ent/contract/scopes';

export const DEFAULT_KEY_SCOPES: Scope[] = ['check'];

export const isScope = (value: string): value is Scope => (SCOPES as readonly string[]).includes(value);
export const isRole = (value: string): value is Role => (ROLES as readonly string[]).includes(value);

/** An empty scope list is "Full access": every scope the role allows. */
export function effectiveScopes(keyScopes: readonly Scope[], role: Role): Set<Scope> {
  const allowedByRole = ROLE_SCOPES[role];
  if (keyScopes.length === 0) return new Set(allowedByRole);
  return new Set(keyScopes.filter((s) => allowedByRole.has(s)));
}

interface PrincipalBase {
  organizationId: string;
  memberId: string;
  /** What the audit log shows as actor.key_prefix: the API key's prefix, or the console session's. */
  keyPrefix: string;
  role: Role;
  /** Literal scopes; `[]` = full access (a session always: it holds whatever its member's role allows). */
  keyScopes: Scope[];
  scopes: Set<Scope>;
}

/** A service account's API key (X-API-Key, or `Authorization: Bearer` on OFREP). */
export interface ApiKeyPrincipal extends PrincipalBase {
  authType: 'member_apikey';
  serviceAccountId: string;
  keyId: string;
}

/** A person signed in to the console (the `ent_session` cookie); a person is no service account. */
export interface SessionPrincipal extends PrincipalBase {
  authType: 'member_session';
  serviceAccountId: null;
  sessionId: string;
}

/** Who is calling, as resolved from the X-API-Key header or the console's session cookie. */
export type Principal = ApiKeyPrincipal | SessionPrincipal;

/** A console session's principal: full access on its member, so its rights are exactly the member's role. */
export function sessionPrincipal(session: {
  organizationId: string;
  memberId: string;
  sessionId: string;
  keyPrefix: string;
  role: Role;
}): SessionPrincipal {
  return {
    organizationId: session.organizationId,
    memberId: session.memberId,
    sessionId: session.sessionId,
    keyPrefix: session.keyPrefix,
    role: session.role,
    keyScopes: [],
    scopes: effectiveScopes([], session.role),
    authType: 'member_session',
    serviceAccountId: null,
  };
}

/** "An admin", "A developer", "A viewer": the start of a refusal that names the caller's role. */
export const aRole = (role: Role): string => `${role === 'admin' ? 'An' : 'A'} ${role}`;

/** Who grants: a key (or session) with its literal scopes (`[]` = full access) on a member with a role. */
export interface Grantor {
  role: Role;
  keyScopes: readonly Scope[];
  /** The key's own service account; null for a session (a person's, with full access). */
  serviceAccountId: string | null;
}

/**
 * What a write would grant. `key`: a new key with `scopes` (`[]` = full access) on a service account.
 * `role`: a member (a user or a service account) given a role it did not hold, or made active again: a
 * session, or any full-access key of that member, then holds everything the role allows.
 */
export type Grant =
  | { kind: 'key'; scopes: readonly Scope[]; target: { serviceAccountId: string; role: Role } }
  | { kind: 'role'; role: Role };

/** Why a grant is refused: a message naming what exceeds the grantor's rights, and the field that asked. */
export interface GrantRefusal {
  message: string;
  field: 'scopes' | 'role' | 'service_account_id';
  value: string | readonly Scope[];
}

const isFullAccess = (grantor: Grantor) => grantor.keyScopes.length === 0;
const missingFrom = (wanted: Iterable<Scope>, held: ReadonlySet<Scope>): Scope[] =>
  SCOPES.filter((scope) => [...wanted].includes(scope) && !held.has(scope));

/**
 * Managing (creating or revoking) keys of a service account: never one ranked above the grantor's role,
 * and a restricted key only its own service account's keys, so a narrow key can neither mint keys under
 * another account's name nor revoke every other integration's keys.
 */
export function keyManagementRefusal(
  grantor: Grantor,
  target: { serviceAccountId: string; role: Role },
): GrantRefusal | null {
  if (ROLE_RANK[target.role] > ROLE_RANK[grantor.role]) {
    return {
      message: `${aRole(grantor.role)} may not manage keys of a service account with the ${target.role} role.`,
      field: 'role',
      value: target.role,
    };
  }
  if (!isFullAccess(grantor) && target.serviceAccountId !== grantor.serviceAccountId) {
    return {
      message:
        'A key with restricted scopes manages only the keys of its own service account; use a full-access key.',
      field: 'service_account_id',
      value: target.serviceAccountId,
    };
  }
  return null;
}

/**
 * Rights never grow (DESIGN.md §2.10): null when `grantor` may grant `grant`, else what exceeds its rights.
 * A key's scopes must be a subset of the grantor's effective scopes; full access only from full access
 * (it follows the account's role, so it may hold more later); a role only from a grantor whose effective
 * scopes hold everything that role allows and whose own role ranks no lower.
 */
export function grantRefusal(grantor: Grantor, grant: Grant): GrantRefusal | null {
  const held = effectiveScopes(grantor.keyScopes, grantor.role);
  if (grant.kind === 'role') {
    const missing = missingFrom(ROLE_SCOPES[grant.role], held);
    if (ROLE_RANK[grant.role] > ROLE_RANK[grantor.role] || missing.length > 0) {
      const lacking = missing.length > 0 ? ` (this key lacks ${missing.join(', ')})` : '';
      return {
        message: `${aRole(grantor.role)} key with these scopes may not grant the ${grant.role} role${lacking}.`,
        field: 'role',
        value: grant.role,
      };
    }
    return null;
  }
  const managing = keyManagementRefusal(grantor, grant.target);
  if (managing) return managing;
  if (grant.scopes.length === 0) {
    const missing = missingFrom(ROLE_SCOPES[grant.target.role], held);
    if (!isFullAccess(grantor) || missing.length > 0) {
      return {
        message:
          'Only a full-access key whose role allows everything it would grant may create a full-access key (scopes: []); list the scopes instead.',
        field: 'scopes',
        value: [],
      };
    }
    return null;
  }
  const missing = missingFrom(grant.scopes, held);
  if (missing.length > 0) {
    return {
      message: `A key may only grant scopes it holds; this key lacks ${missing.join(', ')}.`,
      field: 'scopes',
      value: missing,
    };
  }
  return null;
}

export const canGrant = (grantor: Grantor, grant: Grant): boolean => grantRefusal(grantor, grant) === null;
