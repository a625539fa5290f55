import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';

type Db = Kysely<Database> | Transaction<Database>;

/**
 * The person signing in: a user of the organization with this slug, by lower-cased email, not removed (what
 * members_organization_email, the partial unique index, covers: at most one), with their password hash if any.
 */
export function findSignInCandidate(db: Db, slug: string, email: string) {
  return db
    .selectFrom('organizations as o')
    .innerJoin('members as m', 'm.organization_id', 'o.id')
    .leftJoin('member_passwords as p', 'p.member_id', 'm.id')
    .select(['m.id as member_id', 'm.organization_id', 'm.status', 'p.password_hash'])
    .where('o.slug', '=', slug)
    .where('m.kind', '=', 'user')
    .where('m.email', 'is not', null)
    .where('m.status', '!=', 'removed')
    .where(sql<string>`lower(m.email)`, '=', email.toLowerCase())
    .executeTakeFirst();
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
