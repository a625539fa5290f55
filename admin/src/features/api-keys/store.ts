import type { Kysely, Transaction } from 'kysely';
import type { ApiKey, Database } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';

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

const keyById = (db: Db, organizationId: string, serviceAccountId: string, keyId: string) =>
  db
    .selectFrom('api_keys')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('service_account_id', '=', serviceAccountId)
    .where('id', '=', keyId);

export function findApiKey(
  db: Db,
  organizationId: string,
  serviceAccountId: string,
  keyId: string,
): Promise<ApiKey | undefined> {
  return keyById(db, organizationId, serviceAccountId, keyId).executeTakeFirst();
}

/** The key's row, locked until the transaction ends. */
export function lockApiKey(
  trx: Transaction<Database>,
  organizationId: string,
  serviceAccountId: string,
  keyId: string,
): Promise<ApiKey | undefined> {
  return keyById(trx, organizationId, serviceAccountId, keyId).forUpdate().executeTakeFirst();
}

export function insertApiKey(
  trx: Transaction<Database>,
  values: {
    organizationId: string;
    serviceAccountId: string;
    name: string;
    prefix: string;
    hash: string;
    scopes: string[];
  },
): Promise<ApiKey> {
  return trx
    .insertInto('api_keys')
    .values({
      id: newId('key'),
      organization_id: values.organizationId,
      service_account_id: values.serviceAccountId,
      name: values.name,
      key_prefix: values.prefix,
      key_hash: values.hash,
      scopes: values.scopes,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function revokeApiKeyRow(trx: Transaction<Database>, keyId: string, now: Date): Promise<void> {
  await trx.updateTable('api_keys').set({ revoked_at: now }).where('id', '=', keyId).execute();
}
