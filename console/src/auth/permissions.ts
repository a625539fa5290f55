import { ROLE_RANK, ROLE_SCOPES, SCOPES } from '@ent/contract/scopes';
import type { Role, Scope } from '../api/types.ts';

/**
 * What each role may do comes from the server's own table (common/src/auth/scopes.ts: a module with no
 * imports, so the browser bundle takes it as is), plus the admin-only routes. A session holds everything its
 * member's role allows (a key with no scopes), so the console offers exactly that: viewers read and check,
 * developers write but read no audit log and change no members or invites.
 */
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
  /** Scopes a new key of a service account with `role` may carry: held by this member and allowed by `role`. */
  keyScopesFor(role: Role): readonly Scope[];
}

/** `role`'s scopes in the catalog's order (the order the key form lists them in). */
const scopesOf = (role: Role): readonly Scope[] => SCOPES.filter((scope) => ROLE_SCOPES[role].has(scope));

export function permissionsOf(role: Role): Permissions {
  const scopes = ROLE_SCOPES[role];
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
    keyScopesFor: (target) =>
      writeOrg ? scopesOf(role).filter((scope) => ROLE_SCOPES[target].has(scope)) : [],
  };
}
