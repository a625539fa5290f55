import type { Kysely } from 'kysely';
import { ROLE_RANK, type Principal, type Role } from '@ent/common/auth/scopes';
import type { Database, Member } from '@ent/common/db/database';
import { conflict, notFound } from '@ent/common/errors/app-error';
import { newId } from '@ent/common/ids';
import type { CreateMemberBody, UpdateMemberBody } from '@ent/common/schemas/members';
import { changedFields, type Change } from '../shared/changes.ts';
import { assertMayGrant } from './roles.ts';
import { bumpAuthVersion } from '../shared/versions.ts';
import { countOtherActiveAdmins, findMember, lockOrganization } from './store.ts';

export const memberNotFound = (memberId: string) =>
  notFound(`No member with id "${memberId}".`, { field: 'member_id', value: memberId });

const isUniqueViolation = (error: unknown): boolean => (error as { code?: string }).code === '23505';

/**
 * Console users sign in elsewhere; this records the member (email and role) directly. The member's session
 * will hold everything the role allows, so the caller must hold all of it.
 */
export async function createMember(
  db: Kysely<Database>,
  principal: Principal,
  input: CreateMemberBody,
): Promise<Member> {
  assertMayGrant(principal, { kind: 'role', role: input.role });
  const organizationId = principal.organizationId;
  try {
    return await db.transaction().execute(async (trx) => {
      const member = await trx
        .insertInto('members')
        .values({
          id: newId('mem'),
          organization_id: organizationId,
          kind: 'user',
          email: input.email.toLowerCase(),
          name: input.name ?? null,
          role: input.role,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      await bumpAuthVersion(trx, organizationId);
      return member;
    });
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw conflict(`A member with email "${input.email}" already exists.`, {
        field: 'email',
        value: input.email,
      });
    }
    throw error;
  }
}

export async function getMember(
  db: Kysely<Database>,
  organizationId: string,
  memberId: string,
): Promise<Member> {
  const member = await findMember(db, organizationId, memberId);
  if (!member) throw memberNotFound(memberId);
  return member;
}

export interface MemberUpdateResult {
  member: Member;
  changes: Record<string, Change> | null;
}

/**
 * Raising a role, or making a suspended member active again, grants the member everything its role allows
 * (its sessions and full-access keys follow the role), so either needs a caller who holds all of that.
 * Lowering a role or suspending grants nothing.
 */
const grantsRights = (before: Member, role: Role, status: Member['status']): boolean =>
  status === 'active' && (before.status !== 'active' || ROLE_RANK[role] > ROLE_RANK[before.role as Role]);

/**
 * Role and status changes. `removed` is final and revokes the member's keys; the last active admin can
 * neither be demoted, suspended nor removed.
 */
export async function updateMember(
  db: Kysely<Database>,
  principal: Principal,
  memberId: string,
  input: UpdateMemberBody,
): Promise<MemberUpdateResult> {
  const organizationId = principal.organizationId;
  return db.transaction().execute(async (trx) => {
    await lockOrganization(trx, organizationId);
    const before = await findMember(trx, organizationId, memberId);
    if (!before) throw memberNotFound(memberId);
    const changes = changedFields(before, input, ['role', 'status']);
    if (!changes) return { member: before, changes };
    if (before.status === 'removed') {
      throw conflict('A removed member cannot be changed.', { field: 'status', value: before.status });
    }
    const role = (input.role ?? before.role) as Role;
    const status = input.status ?? before.status;
    if (grantsRights(before, role, status)) assertMayGrant(principal, { kind: 'role', role });
    const losesAdmin =
      before.role === 'admin' && before.status === 'active' && (role !== 'admin' || status !== 'active');
    if (losesAdmin && (await countOtherActiveAdmins(trx, organizationId, memberId)) === 0) {
      throw conflict('The organization must keep at least one active admin.', {
        field: input.role && input.role !== 'admin' ? 'role' : 'status',
        value: input.role && input.role !== 'admin' ? input.role : input.status,
      });
    }
    const member = await trx
      .updateTable('members')
      .set({ role, status, updated_at: new Date() })
      .where('id', '=', memberId)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (status === 'removed') {
      const accounts = trx.selectFrom('service_accounts').select('id').where('member_id', '=', memberId);
      await trx
        .updateTable('api_keys')
        .set({ revoked_at: new Date() })
        .where('organization_id', '=', organizationId)
        .where('service_account_id', 'in', accounts)
        .where('revoked_at', 'is', null)
        .execute();
    }
    await bumpAuthVersion(trx, organizationId);
    return { member, changes };
  });
}
