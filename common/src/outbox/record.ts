import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database, OutboxKind } from '../db/database.ts';

export interface OutboxEntry {
  organizationId: string;
  kind: OutboxKind;
  /** The subscriber id for `subscriber` entries. */
  subject?: string;
  /** The Postgres version the write produced. */
  version: number;
}

/**
 * Records, inside the write's own transaction, what the write must cause in Redis. Committed together with the
 * change or not at all: the relay republishes whatever the inline write-through after the commit did not.
 */
export async function recordOutbox(trx: Transaction<Database>, entry: OutboxEntry): Promise<void> {
  await trx
    .insertInto('outbox')
    .values({
      organization_id: entry.organizationId,
      kind: entry.kind,
      subject: entry.subject ?? null,
      version: entry.version,
    })
    .execute();
}

/**
 * Marks done the undone entries a publish has covered: same organization, kind and subject, at or below the
 * Postgres version that is now in Redis (or older than what Redis holds).
 */
export async function markOutboxDone(db: Kysely<Database>, entry: OutboxEntry): Promise<number> {
  let query = db
    .updateTable('outbox')
    .set({ done_at: sql`now()` })
    .where('done_at', 'is', null)
    .where('organization_id', '=', entry.organizationId)
    .where('kind', '=', entry.kind)
    .where('version', '<=', entry.version);
  query =
    entry.subject === undefined
      ? query.where('subject', 'is', null)
      : query.where('subject', '=', entry.subject);
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Entries named by id (a relay's lease, an import batch's `subscribers` entries) marked done. */
export async function markEntriesDone(db: Kysely<Database>, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('outbox')
    .set({ done_at: sql`now()` })
    .where('id', 'in', ids)
    .where('done_at', 'is', null)
    .execute();
}

/** `markOutboxDone` for many subscribers of one organization in one statement. */
export async function markSubscribersDone(
  db: Kysely<Database>,
  organizationId: string,
  published: readonly { subscriberId: string; version: number }[],
): Promise<number> {
  if (published.length === 0) return 0;
  const result = await sql`
    UPDATE outbox AS o SET done_at = now()
    FROM unnest(${published.map((p) => p.subscriberId)}::text[], ${published.map((p) => p.version)}::bigint[])
      AS p(subject, version)
    WHERE o.done_at IS NULL AND o.organization_id = ${organizationId} AND o.kind = 'subscriber'
      AND o.subject = p.subject AND o.version <= p.version
  `.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** Postgres gave up one of two transactions waiting on each other, or could not serialize it: run it again. */
const RETRYABLE_CODES = new Set(['40P01', '40001']);
const TRANSACTION_ATTEMPTS = 3;

export const isRetryableTransactionError = (error: unknown): boolean =>
  RETRYABLE_CODES.has((error as { code?: unknown } | null)?.code as string);

/**
 * Runs `work` in the caller's transaction when it is one, else in a new one, run again (at most three times in
 * all) when Postgres ends it as a deadlock victim or a serialization failure: nothing of it was committed, and the
 * client would otherwise get a 500 for a race it cannot see. `work` must do nothing outside the transaction.
 */
export async function transact<T>(
  db: Kysely<Database>,
  work: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  if (db.isTransaction) return work(db as Transaction<Database>);
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute(work);
    } catch (error) {
      if (attempt >= TRANSACTION_ATTEMPTS || !isRetryableTransactionError(error)) throw error;
    }
  }
}
