import type { Kysely, Transaction } from 'kysely';
import type { Database, Invite } from '@ent/common/db/database';

type Db = Kysely<Database> | Transaction<Database>;

/** Live: not accepted, not revoked, not expired at `now`. Newest first, one extra row for `has_more`. */
export function listLiveInvites(
  db: Db,
  organizationId: string,
  now: Date,
  filter: { limit: number; startingAfter?: string },
): Promise<Invite[]> {
  let query = db
    .selectFrom('invites')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('accepted_at', 'is', null)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now);
  if (filter.startingAfter) query = query.where('id', '<', filter.startingAfter);
  return query
    .orderBy('id', 'desc')
    .limit(filter.limit + 1)
    .execute();
}

export function findInvite(db: Db, organizationId: string, inviteId: string): Promise<Invite | undefined> {
  return db
    .selectFrom('invites')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('id', '=', inviteId)
    .executeTakeFirst();
}

export function insertInvite(
  db: Db,
  values: {
    id: string;
    organizationId: string;
    role: string;
    email: string | null;
    tokenHash: string;
    tokenCiphertext: string;
    createdByMemberId: string;
    expiresAt: Date;
    createdAt: Date;
  },
): Promise<Invite> {
  return db
    .insertInto('invites')
    .values({
      id: values.id,
      organization_id: values.organizationId,
      role: values.role,
      email: values.email,
      token_hash: values.tokenHash,
      token_ciphertext: values.tokenCiphertext,
      created_by_member_id: values.createdByMemberId,
      expires_at: values.expiresAt,
      created_at: values.createdAt,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Revocation of the invites still live (neither revoked nor accepted) that the caller's conditions pick. */
const revokeLive = (db: Db, now: Date) =>
  db
    .updateTable('invites')
    .set({ revoked_at: now, token_ciphertext: null })
    .where('revoked_at', 'is', null)
    .where('accepted_at', 'is', null);

/** True when a live (not revoked, not accepted) invite was revoked now. */
export async function revokeInviteRow(db: Db, inviteId: string, now: Date): Promise<boolean> {
  const result = await revokeLive(db, now).where('id', '=', inviteId).executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/**
 * Revokes the live invites `memberId` made for a role in `roles` (all of them: pass every role): an invite acts
 * with its maker's rights, so one that outlives them (the maker removed, suspended or demoted) must not hand them
 * out. Returns how many were revoked.
 */
export async function revokeInviteRowsMadeBy(
  db: Db,
  organizationId: string,
  memberId: string,
  roles: readonly string[],
  now: Date,
): Promise<number> {
  if (roles.length === 0) return 0;
  const result = await revokeLive(db, now)
    .where('organization_id', '=', organizationId)
    .where('created_by_member_id', '=', memberId)
    .where('role', 'in', roles)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Marks the invite of this token accepted, once and only while it is live; undefined otherwise. */
export function acceptInviteRow(
  trx: Transaction<Database>,
  tokenHash: string,
  now: Date,
): Promise<Invite | undefined> {
  return trx
    .updateTable('invites')
    .set({ accepted_at: now, token_ciphertext: null })
    .where('token_hash', '=', tokenHash)
    .where('accepted_at', 'is', null)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .returningAll()
    .executeTakeFirst();
}

/** The invite of this token with its organization's name and slug (the console's join page shows them). */
export function findInviteByTokenHash(db: Db, tokenHash: string) {
  return db
    .selectFrom('invites as i')
    .innerJoin('organizations as o', 'o.id', 'i.organization_id')
    .selectAll('i')
    .select(['o.name as organization_name', 'o.slug as organization_slug'])
    .where('i.token_hash', '=', tokenHash)
    .executeTakeFirst();
}
