import type { Kysely, Transaction } from 'kysely';
import type { ConsoleSession, Database } from '@ent/common/db/database';

type Db = Kysely<Database> | Transaction<Database>;

export function insertSession(
  db: Db,
  values: {
    id: string;
    organizationId: string;
    memberId: string;
    tokenHash: string;
    tokenPrefix: string;
    csrfHash: string;
    createdAt: Date;
    expiresAt: Date;
  },
): Promise<ConsoleSession> {
  return db
    .insertInto('console_sessions')
    .values({
      id: values.id,
      organization_id: values.organizationId,
      member_id: values.memberId,
      token_hash: values.tokenHash,
      token_prefix: values.tokenPrefix,
      csrf_hash: values.csrfHash,
      created_at: values.createdAt,
      expires_at: values.expiresAt,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * The session of this token hash while it lives: not revoked, not expired at `now`, its member an active user.
 * With the member and the organization the console shows; undefined otherwise.
 */
export function findLiveSession(db: Db, tokenHash: string, now: Date) {
  return db
    .selectFrom('console_sessions as s')
    .innerJoin('members as m', (join) =>
      join.onRef('m.id', '=', 's.member_id').onRef('m.organization_id', '=', 's.organization_id'),
    )
    .innerJoin('organizations as o', 'o.id', 's.organization_id')
    .select([
      's.id',
      's.organization_id',
      's.member_id',
      's.token_prefix',
      's.csrf_hash',
      's.expires_at',
      'm.email',
      'm.name',
      'm.role',
      'o.name as organization_name',
      'o.slug as organization_slug',
    ])
    .where('s.token_hash', '=', tokenHash)
    .where('s.revoked_at', 'is', null)
    .where('s.expires_at', '>', now)
    .where('m.status', '=', 'active')
    .where('m.kind', '=', 'user')
    .executeTakeFirst();
}

export async function revokeSessionRow(db: Db, sessionId: string, now: Date): Promise<void> {
  await db
    .updateTable('console_sessions')
    .set({ revoked_at: now })
    .where('id', '=', sessionId)
    .where('revoked_at', 'is', null)
    .execute();
}

/** Ends every live session of the member, but `keep` (the session that changed the password) when given. */
export async function revokeMemberSessionRows(
  db: Db,
  organizationId: string,
  memberId: string,
  now: Date,
  keep?: string,
): Promise<number> {
  let query = db
    .updateTable('console_sessions')
    .set({ revoked_at: now })
    .where('organization_id', '=', organizationId)
    .where('member_id', '=', memberId)
    .where('revoked_at', 'is', null);
  if (keep !== undefined) query = query.where('id', '!=', keep);
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}
