import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';

export interface StoredKey {
  fingerprint: string;
  /** Null while the write that reserved the key has not recorded its response. */
  responseStatus: number | null;
  responseContentType: string | null;
  responseBody: string | null;
}

export interface RecordedResponse {
  status: number;
  contentType: string | null;
  body: string;
}

/** Expired rows deleted per prune: bounded work, more than one write adds. */
export const PRUNE_BATCH = 100;

export async function findLiveKey(
  db: Kysely<Database>,
  organizationId: string,
  key: string,
  now: Date,
): Promise<StoredKey | null> {
  const row = await db
    .selectFrom('idempotency_keys')
    .select(['fingerprint', 'response_status', 'response_content_type', 'response_body'])
    .where('organization_id', '=', organizationId)
    .where('key', '=', key)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  if (!row) return null;
  return {
    fingerprint: row.fingerprint,
    responseStatus: row.response_status,
    responseContentType: row.response_content_type,
    responseBody: row.response_body,
  };
}

/**
 * Reserves the key inside the write's transaction. Another transaction holding the same key (a concurrent request
 * still running) is detected without waiting: the transaction-scoped advisory lock is taken or refused at once.
 * Returns false when the key is held or already used (live): the caller answers 409.
 */
export async function reserveKey(
  trx: Transaction<Database>,
  organizationId: string,
  key: string,
  fingerprint: string,
  now: Date,
  expiresAt: Date,
): Promise<boolean> {
  const lock = await sql<{ locked: boolean }>`
    SELECT pg_try_advisory_xact_lock(hashtextextended(${organizationId} || '/' || ${key}, 0)) AS locked
  `.execute(trx);
  if (!lock.rows[0]?.locked) return false;
  const inserted = await trx
    .insertInto('idempotency_keys')
    .values({ organization_id: organizationId, key, fingerprint, created_at: now, expires_at: expiresAt })
    .onConflict((conflict) =>
      conflict
        .columns(['organization_id', 'key'])
        .doUpdateSet({
          fingerprint,
          response_status: null,
          response_content_type: null,
          response_body: null,
          created_at: now,
          expires_at: expiresAt,
        })
        .where('idempotency_keys.expires_at', '<=', now),
    )
    .returning('key')
    .executeTakeFirst();
  return inserted !== undefined;
}

/** Completes a reserved key with the response its write answered. */
export async function recordResponse(
  db: Kysely<Database>,
  organizationId: string,
  key: string,
  response: RecordedResponse,
): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({
      response_status: response.status,
      response_content_type: response.contentType,
      response_body: response.body,
    })
    .where('organization_id', '=', organizationId)
    .where('key', '=', key)
    .execute();
}

/** A 2xx answered without a write (a route that found nothing to do): kept like any other, unless taken meanwhile. */
export async function insertAnswered(
  db: Kysely<Database>,
  organizationId: string,
  key: string,
  fingerprint: string,
  response: RecordedResponse,
  now: Date,
  expiresAt: Date,
): Promise<void> {
  await db
    .insertInto('idempotency_keys')
    .values({
      organization_id: organizationId,
      key,
      fingerprint,
      response_status: response.status,
      response_content_type: response.contentType,
      response_body: response.body,
      created_at: now,
      expires_at: expiresAt,
    })
    .onConflict((conflict) => conflict.columns(['organization_id', 'key']).doNothing())
    .execute();
}

/** Deletes a bounded batch of expired keys, skipping rows another pruner holds; answers how many it deleted. */
export async function pruneExpiredKeys(db: Kysely<Database>, now: Date): Promise<number> {
  const result = await sql`
    DELETE FROM idempotency_keys WHERE (organization_id, key) IN (
      SELECT organization_id, key FROM idempotency_keys WHERE expires_at <= ${now}
      LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED
    )
  `.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
