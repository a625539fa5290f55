import type { Kysely, Transaction } from 'kysely';
import type { ApiKey, Database } from '@ent/common/db/database';

type Db = Kysely<Database> | Transaction<Database>;

/** Newest first; one extra row for `has_more`. Revoked keys stay listed with `revoked_at`. */
export function listApiKeys(
  db: Db,
  organizationId: string,
  serviceAccountId: string,
  filter: { limit: number; startingAfter?: string },
): Promise<ApiKey[]> {
  let query = db
    .selectFrom('api_keys')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('service_account_id', '=', serviceAccountId);
  if (filter.startingAfter) query = query.where('id', '<', filter.startingAfter);
  return query
    .orderBy('id', 'desc')
    .limit(filter.limit + 1)
    .execute();
}

export function findApiKey(
  db: Db,
  organizationId: string,
  serviceAccountId: string,
  keyId: string,
): Promise<ApiKey | undefined> {
  return db
    .selectFrom('api_keys')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('service_account_id', '=', serviceAccountId)
    .where('id', '=', keyId)
    .executeTakeFirst();
}
