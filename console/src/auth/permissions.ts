import type { Role, Scope } from '../api/types.ts';

/**
 * What each role may do, as common/src/auth/scopes.ts ROLE_SCOPES and the admin-only routes define it. A
 * session holds everything its member's role allows (a key with no scopes), so the console offers exactly
 * that: viewers read and check, developers write but read no audit log and change no members or invites.
 */
export const ROLE_RANK: Record<Role, number> = { viewer: 0, developer: 1, admin: 2 };

const ALL_SCOPES: readonly Scope[] = [
  'check',
  'catalog:read',
  'catalog:write',
  'subscribers:read',
  'subscribers:write',
  'org:read',
  'org:write',
  'org:audit:read',
];

export const ROLE_SCOPES: Record<Role, readonly Scope[]> = {
  admin: ALL_SCOPES,
  developer: ALL_SCOPES.filter((scope) => scope !== 'org:audit:read'),
  viewer: ['check', 'catalog:read', 'subscribers:read', 'org:read'],
};

export interface Permissions {
  role: Role;
  writeCatalog: boolean;
  writeSubscribers: boolean;
  writeOrg: boolean;
  readAudit: boolean;
  /** Members' roles and status, and invites: admin-only routes. */
  manageMembers: boolean;
  /** Roles this member may give a service account (never above their own). */
  grantableRoles: Role[];
  /** Keys of a service account with `role`: never one ranked above the member's own. */
  manageKeysOf(role: Role): boolean;
  /** Scopes a new key may carry: a subset of what this member holds. */
  grantableScopes: readonly Scope[];
}

export function permissionsOf(role: Role): Permissions {
  const scopes = new Set(ROLE_SCOPES[role]);
  const writeOrg = scopes.has('org:write');
  const grantableRoles = (Object.keys(ROLE_RANK) as Role[]).filter((r) => ROLE_RANK[r] <= ROLE_RANK[role]);
  return {
    role,
    writeCatalog: scopes.has('catalog:write'),
    writeSubscribers: scopes.has('subscribers:write'),
    writeOrg,
    readAudit: scopes.has('org:audit:read'),
    manageMembers: role === 'admin',
    grantableRoles: writeOrg ? grantableRoles.sort((a, b) => ROLE_RANK[b] - ROLE_RANK[a]) : [],
    manageKeysOf: (target) => writeOrg && ROLE_RANK[target] <= ROLE_RANK[role],
    grantableScopes: writeOrg ? ROLE_SCOPES[role] : [],
  };
}
