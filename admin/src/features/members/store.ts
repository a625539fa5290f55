import type { Kysely, Transaction } from 'kysely';
import type { Database, Member, MemberStatus } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';

type Db = Kysely<Database> | Transaction<Database>;

export function findMember(db: Db, organizationId: string, memberId: string): Promise<Member | undefined> {
  return db
    .selectFrom('members')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('id', '=', memberId)
    .executeTakeFirst();
}

export interface MemberListFilter {
  limit: number;
  startingAfter?: string;
  status?: MemberStatus;
  kind?: Member['kind'];
}

/** Newest first; fetches one extra row to tell whether another page follows. */
export function listMembers(db: Db, organizationId: string, filter: MemberListFilter): Promise<Member[]> {
  let query = db.selectFrom('members').selectAll().where('organization_id', '=', organizationId);
  if (filter.status) query = query.where('status', '=', filter.status);
  if (filter.kind) query = query.where('kind', '=', filter.kind);
  if (filter.startingAfter) query = query.where('id', '<', filter.startingAfter);
  return query
    .orderBy('id', 'desc')
    .limit(filter.limit + 1)
    .execute();
}

/** Active admins other than `memberId`, counted while the organization row is locked. */
export async function countOtherActiveAdmins(
  trx: Transaction<Database>,
  organizationId: string,
  memberId: string,
): Promise<number> {
  const row = await trx
    .selectFrom('members')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('organization_id', '=', organizationId)
    .where('role', '=', 'admin')
    .where('status', '=', 'active')
    .where('id', '!=', memberId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** A user member (console sign-in); the email is stored lowercase. */
export function insertMember(
  trx: Transaction<Database>,
  organizationId: string,
  input: { email: string; name?: string | null; role: string },
): Promise<Member> {
  return trx
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
}

export function updateMemberRow(
  trx: Transaction<Database>,
  memberId: string,
  values: { role: string; status: MemberStatus },
): Promise<Member> {
  return trx
    .updateTable('members')
    .set({ ...values, updated_at: new Date() })
    .where('id', '=', memberId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Revokes every live key of the member's service accounts (a service account member's own keys); returns them. */
export function revokeMemberKeys(
  trx: Transaction<Database>,
  organizationId: string,
  memberId: string,
  now: Date,
): Promise<{ id: string; key_prefix: string }[]> {
  const accounts = trx.selectFrom('service_accounts').select('id').where('member_id', '=', memberId);
  return trx
    .updateTable('api_keys')
    .set({ revoked_at: now })
    .where('organization_id', '=', organizationId)
    .where('service_account_id', 'in', accounts)
    .where('revoked_at', 'is', null)
    .returning(['id', 'key_prefix'])
    .execute();
}
