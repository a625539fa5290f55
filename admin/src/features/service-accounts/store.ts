import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database, MemberStatus } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';

type Db = Kysely<Database> | Transaction<Database>;

/** A service account with its member's role and status (a service account is a member). */
export interface ServiceAccountRow {
  id: string;
  organization_id: string;
  member_id: string;
  name: string;
  role: string;
  status: MemberStatus;
  created_at: Date;
  updated_at: Date;
}

const withMember = (db: Db, organizationId: string) =>
  db
    .selectFrom('service_accounts as sa')
    .innerJoin('members as m', 'm.id', 'sa.member_id')
    .select([
      'sa.id',
      'sa.organization_id',
      'sa.member_id',
      'sa.name',
      'm.role',
      'm.status',
      'sa.created_at',
      // A role or status change is made on the member it is: the account changed then too.
      sql<Date>`greatest(sa.updated_at, m.updated_at)`.as('updated_at'),
    ])
    .where('sa.organization_id', '=', organizationId);

export function findServiceAccount(
  db: Db,
  organizationId: string,
  id: string,
): Promise<ServiceAccountRow | undefined> {
  return withMember(db, organizationId).where('sa.id', '=', id).executeTakeFirst();
}

/** Newest first; one extra row for `has_more`. */
export function listServiceAccounts(
  db: Db,
  organizationId: string,
  filter: { limit: number; startingAfter?: string },
): Promise<ServiceAccountRow[]> {
  let query = withMember(db, organizationId);
  if (filter.startingAfter) query = query.where('sa.id', '<', filter.startingAfter);
  return query
    .orderBy('sa.id', 'desc')
    .limit(filter.limit + 1)
    .execute();
}

/** A service account and the member it is; returns the account's id. */
export async function insertServiceAccount(
  trx: Transaction<Database>,
  organizationId: string,
  input: { name: string; role: string },
): Promise<string> {
  const memberId = newId('mem');
  const id = newId('sa');
  await trx
    .insertInto('members')
    .values({
      id: memberId,
      organization_id: organizationId,
      kind: 'service_account',
      name: input.name,
      role: input.role,
    })
    .execute();
  await trx
    .insertInto('service_accounts')
    .values({ id, organization_id: organizationId, member_id: memberId, name: input.name })
    .execute();
  return id;
}

/** Renames the account and the member it is. */
export async function renameServiceAccount(
  trx: Transaction<Database>,
  account: { id: string; member_id: string },
  name: string,
): Promise<void> {
  const now = new Date();
  await trx
    .updateTable('service_accounts')
    .set({ name, updated_at: now })
    .where('id', '=', account.id)
    .execute();
  await trx
    .updateTable('members')
    .set({ name, updated_at: now })
    .where('id', '=', account.member_id)
    .execute();
}
