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
