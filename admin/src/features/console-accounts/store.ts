import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';

type Db = Kysely<Database> | Transaction<Database>;

/**
 * How many memberships a sign-in without an organization checks (each costs a scrypt): sign-up does not prove an
 * email is one's own, so anyone could give an email many organizations and make its every sign-in expensive. The
 * oldest count; a person in more organizations names the slug to reach the newer ones.
 */
const SIGN_IN_MEMBERSHIPS_CHECKED = 20;

/**
 * The person signing in: the users with this lower-cased email, not removed (members_organization_email, the
 * partial unique index, allows one per organization), with their password hash if any; only the organization with
 * `slug` when one is given. Oldest membership first, so a list of several always comes in the same order.
 */
export function findSignInCandidates(db: Db, email: string, slug?: string) {
  let query = db
    .selectFrom('organizations as o')
    .innerJoin('members as m', 'm.organization_id', 'o.id')
    .leftJoin('member_passwords as p', 'p.member_id', 'm.id')
    .select([
      'm.id as member_id',
      'm.organization_id',
      'm.status',
      'p.password_hash',
      'o.name as organization_name',
      'o.slug as organization_slug',
    ])
    .where('m.kind', '=', 'user')
    .where('m.email', 'is not', null)
    .where('m.status', '!=', 'removed')
    .where(sql<string>`lower(m.email)`, '=', email.toLowerCase());
  if (slug !== undefined) query = query.where('o.slug', '=', slug);
  return query.orderBy('m.id').limit(SIGN_IN_MEMBERSHIPS_CHECKED).execute();
}

export async function findPasswordHash(db: Db, memberId: string): Promise<string | null> {
  const row = await db
    .selectFrom('member_passwords')
    .select('password_hash')
    .where('member_id', '=', memberId)
    .executeTakeFirst();
  return row?.password_hash ?? null;
}

export async function setPasswordHash(
  db: Db,
  member: { organizationId: string; memberId: string },
  passwordHash: string,
  now: Date,
): Promise<void> {
  await db
    .insertInto('member_passwords')
    .values({
      member_id: member.memberId,
      organization_id: member.organizationId,
      password_hash: passwordHash,
      created_at: now,
      updated_at: now,
    })
    .onConflict((conflict) =>
      conflict.column('member_id').doUpdateSet({ password_hash: passwordHash, updated_at: now }),
    )
    .execute();
}
