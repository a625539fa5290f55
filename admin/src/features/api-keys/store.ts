import type { Kysely, Transaction } from 'kysely';
import type { ApiKey, Database } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';

type Db = Kysely<Database> | Transaction<Database>;

/** A key as the routes show it: with the email of the member who minted it (null: none recorded, or no email). */
export type ApiKeyRow = ApiKey & { minted_by_email: string | null };

const keysWithMinter = (db: Db, organizationId: string) =>
  db
    .selectFrom('api_keys')
    .leftJoin('members as minter', (join) =>
      join
        .onRef('minter.id', '=', 'api_keys.minted_by_member_id')
        .onRef('minter.organization_id', '=', 'api_keys.organization_id'),
    )
    .selectAll('api_keys')
    .select('minter.email as minted_by_email')
    .where('api_keys.organization_id', '=', organizationId);

/** Newest first; one extra row for `has_more`. Revoked keys stay listed with `revoked_at`. */
export function listApiKeys(
  db: Db,
  organizationId: string,
  serviceAccountId: string,
  filter: { limit: number; startingAfter?: string },
): Promise<ApiKeyRow[]> {
  let query = keysWithMinter(db, organizationId).where('api_keys.service_account_id', '=', serviceAccountId);
  if (filter.startingAfter) query = query.where('api_keys.id', '<', filter.startingAfter);
  return query
    .orderBy('api_keys.id', 'desc')
    .limit(filter.limit + 1)
    .execute();
}

/** The live keys `memberId` minted (on any service account), newest first; one extra row for `has_more`. */
export function listLiveKeysMintedBy(
  db: Db,
  organizationId: string,
  memberId: string,
  filter: { limit: number; startingAfter?: string },
): Promise<ApiKeyRow[]> {
  let query = keysWithMinter(db, organizationId)
    .where('api_keys.minted_by_member_id', '=', memberId)
    .where('api_keys.revoked_at', 'is', null);
  if (filter.startingAfter) query = query.where('api_keys.id', '<', filter.startingAfter);
  return query
    .orderBy('api_keys.id', 'desc')
    .limit(filter.limit + 1)
    .execute();
}

/** A key `memberId` minted, live or revoked: what a cursor of their minted-key list may name. */
export function findKeyMintedBy(
  db: Db,
  organizationId: string,
  memberId: string,
  keyId: string,
): Promise<ApiKeyRow | undefined> {
  return keysWithMinter(db, organizationId)
    .where('api_keys.minted_by_member_id', '=', memberId)
    .where('api_keys.id', '=', keyId)
    .executeTakeFirst();
}

/**
 * Revokes every live key `memberId` minted and returns them (id and prefix, oldest first). Callers hold the
 * organization's lock, which every key creation also takes, so no key of theirs is minted meanwhile.
 */
export function revokeKeysMintedBy(
  trx: Transaction<Database>,
  organizationId: string,
  memberId: string,
  now: Date,
): Promise<{ id: string; key_prefix: string }[]> {
  return trx
    .updateTable('api_keys')
    .set({ revoked_at: now })
    .where('organization_id', '=', organizationId)
    .where('minted_by_member_id', '=', memberId)
    .where('revoked_at', 'is', null)
    .returning(['id', 'key_prefix'])
    .execute();
}

/** The live keys `memberId` minted (id and prefix), left as they are: what a removal that keeps them records. */
export function liveKeysMintedBy(
  trx: Transaction<Database>,
  organizationId: string,
  memberId: string,
): Promise<{ id: string; key_prefix: string }[]> {
  return trx
    .selectFrom('api_keys')
    .select(['id', 'key_prefix'])
    .where('organization_id', '=', organizationId)
    .where('minted_by_member_id', '=', memberId)
    .where('revoked_at', 'is', null)
    .orderBy('id')
    .execute();
}

const keyById = (db: Db, organizationId: string, serviceAccountId: string, keyId: string) =>
  keysWithMinter(db, organizationId)
    .where('api_keys.service_account_id', '=', serviceAccountId)
    .where('api_keys.id', '=', keyId);

export function findApiKey(
  db: Db,
  organizationId: string,
  serviceAccountId: string,
  keyId: string,
): Promise<ApiKeyRow | undefined> {
  return keyById(db, organizationId, serviceAccountId, keyId).executeTakeFirst();
}

/** The key's row, locked until the transaction ends. */
export function lockApiKey(
  trx: Transaction<Database>,
  organizationId: string,
  serviceAccountId: string,
  keyId: string,
): Promise<ApiKey | undefined> {
  return trx
    .selectFrom('api_keys')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('service_account_id', '=', serviceAccountId)
    .where('id', '=', keyId)
    .forUpdate()
    .executeTakeFirst();
}

/** Who minted the key a request came with (null: none recorded); read in the transaction that mints with it. */
export async function minterOfKey(trx: Transaction<Database>, keyId: string): Promise<string | null> {
  const row = await trx
    .selectFrom('api_keys')
    .select('minted_by_member_id')
    .where('id', '=', keyId)
    .executeTakeFirst();
  return row?.minted_by_member_id ?? null;
}

export async function insertApiKey(
  trx: Transaction<Database>,
  values: {
    organizationId: string;
    serviceAccountId: string;
    name: string;
    prefix: string;
    hash: string;
    scopes: string[];
    mintedByMemberId: string | null;
    mintedWithKeyId: string | null;
  },
): Promise<ApiKeyRow> {
  const id = newId('key');
  await trx
    .insertInto('api_keys')
    .values({
      id,
      organization_id: values.organizationId,
      service_account_id: values.serviceAccountId,
      name: values.name,
      key_prefix: values.prefix,
      key_hash: values.hash,
      scopes: values.scopes,
      minted_by_member_id: values.mintedByMemberId,
      minted_with_key_id: values.mintedWithKeyId,
    })
    .execute();
  return (await findApiKey(trx, values.organizationId, values.serviceAccountId, id))!;
}

export async function revokeApiKeyRow(trx: Transaction<Database>, keyId: string, now: Date): Promise<void> {
  await trx.updateTable('api_keys').set({ revoked_at: now }).where('id', '=', keyId).execute();
}
