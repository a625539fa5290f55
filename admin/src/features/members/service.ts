import type { Kysely, Transaction } from 'kysely';
import { ROLE_RANK, ROLES, type Principal, type Role } from '@ent/common/auth/scopes';
import type { Database, Member } from '@ent/common/db/database';
import { transact } from '@ent/common/outbox/record';
import { conflict, notFound, validationError } from '@ent/common/errors/app-error';
import type { ApiKeyBody } from '@ent/contract/api-keys';
import type { CreateMemberBody, UpdateMemberBody } from '@ent/contract/members';
import { changedFields } from '../shared/changes.ts';
import type { AuditDetails, WriteOutcome } from '../shared/write/outcome.ts';
import { listKeysMintedBy, settleKeysMintedBy, toApiKeyBody } from '../api-keys/service.ts';
import { withCallerConfirmed } from '../shared/write/locks.ts';
import { endMemberSessions } from '../console-sessions/service.ts';
import { assertMayGrant, removedMemberUnchangeable } from '../shared/rights.ts';
import { bumpAuthVersion } from '../shared/versions.ts';
import { revokeInvitesMadeBy, useInvite } from '../invites/service.ts';
import {
  countOtherActiveAdmins,
  findMember,
  insertMember,
  revokeMemberKeys,
  updateMemberRow,
  listMembers as listMemberRows,
  type MemberListFilter,
} from './store.ts';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';

const memberNotFound = (memberId: string) =>
  notFound(`No member with id "${memberId}".`, { field: 'member_id', value: memberId });

const isUniqueViolation = (error: unknown): boolean => (error as { code?: string }).code === '23505';

/**
 * Records a person (email and role) directly; they have no password, so they reach the console by an invite.
 * The member's session will hold everything the role allows, so the caller must hold all of it.
 */
export async function createMember(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  principal: Principal,
  input: CreateMemberBody,
): Promise<Member> {
  assertMayGrant(principal, { kind: 'role', role: input.role });
  const organizationId = principal.organizationId;
  try {
    return await withCallerConfirmed(db, principal, async (trx) => {
      const member = await insertMember(trx, organizationId, input);
      await bumpAuthVersion(trx, outcome, organizationId);
      outcome.details = { member_id: member.id, role: member.role };
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

/**
 * `revoke_minted_keys` only means something to a request that asks for a removal or names a role (a demotion, or
 * a retry of one that already happened); anywhere else a client sending it would believe keys were revoked.
 */
function assertRevokeFlagApplies(input: UpdateMemberBody): void {
  if (input.revoke_minted_keys === undefined || input.status === 'removed' || input.role !== undefined)
    return;
  throw validationError('revoke_minted_keys applies only to a removal (status "removed") or a role change.', {
    field: 'revoke_minted_keys',
    value: input.revoke_minted_keys,
  });
}

/** `{key_id, key_prefix}` of each key, oldest first (as `UPDATE ... RETURNING` gives them in no set order). */
const keyRefs = (keys: { id: string; key_prefix: string }[]) =>
  [...keys]
    .sort((a, b) => a.id.localeCompare(b.id))
    .map((key) => ({ key_id: key.id, key_prefix: key.key_prefix }));

/**
 * Raising a role, or making a suspended member active again, grants the member everything its role allows
 * (its sessions and full-access keys follow the role), so either needs a caller who holds all of that. A role
 * raised while the member is suspended counts too: whoever reactivates the member later hands it out without
 * having chosen it. Lowering a role or suspending grants nothing.
 */
const grantsRights = (before: Member, role: Role, status: Member['status']): boolean =>
  ROLE_RANK[role] > ROLE_RANK[before.role as Role] || (status === 'active' && before.status !== 'active');

/**
 * Role and status changes. `removed` is final and revokes the member's keys; suspending or removing ends the
 * member's console sessions and revokes the invites they made, and a demotion revokes those they made for a role
 * above the new one; the last active admin can neither be demoted, suspended nor removed. A removal or a demotion
 * also revokes every live key the member minted (what they could have copied), unless `revoke_minted_keys` is
 * false: in this transaction, so no request with such a key is let in once the write is answered.
 *
 * The audit details are what changed (null: nothing did); a removal or demotion adds `revoke_minted_keys` (as
 * applied) and `revoked_keys`, `kept_keys` (each `{key_id, key_prefix}`).
 */
export async function updateMember(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  principal: Principal,
  memberId: string,
  input: UpdateMemberBody,
  now: Date,
): Promise<Member> {
  const organizationId = principal.organizationId;
  assertRevokeFlagApplies(input);
  return withCallerConfirmed(db, principal, async (trx) => {
    const before = await findMember(trx, organizationId, memberId);
    if (!before) throw memberNotFound(memberId);
    const details: AuditDetails | null = changedFields(before, input, ['role', 'status']);
    if (!details) {
      outcome.unchangedOn({ auth: true });
      return before;
    }
    if (before.status === 'removed') throw removedMemberUnchangeable();
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
    const member = await updateMemberRow(trx, memberId, { role, status });
    const demoted = ROLE_RANK[role] < ROLE_RANK[before.role as Role];
    if (status === 'removed' || demoted) {
      const revokeMinted = input.revoke_minted_keys ?? true;
      const ownKeys = status === 'removed' ? await revokeMemberKeys(trx, organizationId, memberId, now) : [];
      const minted = await settleKeysMintedBy(trx, organizationId, memberId, revokeMinted, now);
      details.revoke_minted_keys = revokeMinted;
      details.revoked_keys = keyRefs(revokeMinted ? [...ownKeys, ...minted] : ownKeys);
      details.kept_keys = keyRefs(revokeMinted ? [] : minted);
    }
    if (status !== 'active') await endMemberSessions(trx, { organizationId, memberId }, now);
    // Invites this member made for a role they no longer hold (every role, once not active) go with it.
    const outranking = ROLES.filter((invited) => status !== 'active' || ROLE_RANK[invited] > ROLE_RANK[role]);
    await revokeInvitesMadeBy(trx, organizationId, memberId, outranking, now);
    await bumpAuthVersion(trx, outcome, organizationId);
    outcome.details = details;
    return member;
  });
}

/**
 * Joining with an invite (the console's join page): the token is used once, atomically, and only before it
 * expires; 404 for a token never issued, 409 (`details.reason`) when it was used, revoked or has expired, 409
 * when the email already belongs to a member. Joins the caller's transaction when given one, so what comes with
 * joining (the console's password and session) commits with it or not at all. Returns the new member.
 */
export async function redeemInvite(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  token: string,
  joiner: { email?: string | undefined; name?: string | undefined },
  now: Date,
): Promise<Member> {
  return transact(db, async (trx) => {
    const { invite, email } = await useInvite(trx, token, joiner.email, now);
    let member: Member;
    try {
      member = await insertMember(trx, invite.organization_id, {
        email,
        name: joiner.name ?? null,
        role: invite.role as Role,
      });
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      throw conflict(`A member with email "${email}" already exists in this organization.`, {
        field: 'email',
        value: email,
      });
    }
    await bumpAuthVersion(trx, outcome, invite.organization_id);
    return member;
  });
}

/** A person who signs up joins the organization they made as its first member (console sign-up). */
export const insertFirstAdmin = (
  trx: Transaction<Database>,
  organizationId: string,
  person: { email: string; name: string | null },
): Promise<Member> => insertMember(trx, organizationId, { ...person, role: 'admin' });

/** The organization's members, newest first, one page. */
export function listMembers(
  db: Kysely<Database>,
  organizationId: string,
  request: PageRequest<MemberListFilter>,
): Promise<Page<Member>> {
  return paginate(
    request,
    { find: (id) => findMember(db, organizationId, id), what: 'a member of this organization' },
    (filter) => listMemberRows(db, organizationId, filter),
  );
}

/** The live keys a member minted, as the API shows them, one page: what removing or demoting the member revokes. */
export async function listMintedKeys(
  db: Kysely<Database>,
  organizationId: string,
  memberId: string,
  request: PageRequest<{ limit: number; startingAfter?: string | undefined }>,
): Promise<Page<ApiKeyBody>> {
  const member = await getMember(db, organizationId, memberId);
  const page = await listKeysMintedBy(db, organizationId, member.id, request);
  return { items: page.items.map(toApiKeyBody), hasMore: page.hasMore };
}
