import {
  ROLE_RANK,
  aRole,
  grantRefusal,
  keyManagementRefusal,
  type Grant,
  type Principal,
  type Role,
} from '@ent/common/auth/scopes';
import { conflict, forbidden } from '@ent/common/errors/app-error';

/**
 * No one acts on a service account ranked above their own role, and no one creates one: otherwise a
 * developer could mint an admin key.
 */
export function assertMayManageRole(principal: Principal, role: Role): void {
  if (ROLE_RANK[role] > ROLE_RANK[principal.role]) {
    throw forbidden(`${aRole(principal.role)} may not manage a service account with the ${role} role.`, {
      field: 'role',
      value: role,
    });
  }
}

/** 403 unless the principal holds everything the grant would give (DESIGN.md §2.10). */
export function assertMayGrant(principal: Principal, grant: Grant): void {
  const refusal = grantRefusal(principal, grant);
  if (refusal) throw forbidden(refusal.message, { field: refusal.field, value: refusal.value });
}

/** 403 unless the principal may create or revoke keys of this service account. */
export function assertMayManageKeys(
  principal: Principal,
  target: { serviceAccountId: string; role: Role },
): void {
  const refusal = keyManagementRefusal(principal, target);
  if (refusal) throw forbidden(refusal.message, { field: refusal.field, value: refusal.value });
}

/** `removed` is final: a removed member (or the service account that is one) changes no more. */
export const removedMemberUnchangeable = () =>
  conflict('A removed member cannot be changed.', { field: 'status', value: 'removed' });
