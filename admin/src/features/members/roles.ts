import type { Principal, Role } from '@ent/common/auth/scopes';
import { forbidden } from '@ent/common/errors/app-error';

const RANK: Record<Role, number> = { viewer: 0, developer: 1, admin: 2 };

/**
 * No one acts on a service account (or its keys) ranked above their own role, and no one creates one:
 * otherwise a developer could mint an admin key.
 */
export function assertMayManageRole(principal: Principal, role: Role): void {
  if (RANK[role] > RANK[principal.role]) {
    throw forbidden(`A ${principal.role} may not manage a service account with the ${role} role.`, {
      field: 'role',
      value: role,
    });
  }
}
