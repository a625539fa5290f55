import { sql, type Kysely } from 'kysely';
import type { Database, OutboxKind } from '@ent/common/db/database';

export interface OutboxRow {
  id: number;
  organization_id: string;
  kind: OutboxKind;
  subject: string | null;
  /** The subscribers of a `subscribers` entry. */
  subjects: string[] | null;
  version: number;
  attempts: number;
}

/**
 * Leases the oldest undone entries that are due: they are not due again for `leaseMs`, so a second relay skips
 * them, and a relay that dies mid-publish leaves them to be retried once the lease runs out. Nothing stays locked
 * while the relay talks to Redis (the publisher marks entries done on its own connection).
 */
export async function leaseDue(db: Kysely<Database>, limit: number, leaseMs: number): Promise<OutboxRow[]> {
  const result = await sql<OutboxRow>`
    UPDATE outbox SET next_attempt_at = now() + make_interval(secs => ${leaseMs / 1000})
    WHERE id IN (
      SELECT id FROM outbox
      WHERE done_at IS NULL AND next_attempt_at <= now()
      ORDER BY id
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    )
    RETURNING id, organization_id, kind, subject, subjects, version, attempts
  `.execute(db);
  return result.rows.sort((a, b) => a.id - b.id);
}

export async function markFailed(
  db: Kysely<Database>,
  ids: readonly number[],
  error: string,
  retryInMs: number,
): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('outbox')
    .set({
      attempts: sql`attempts + 1`,
      last_error: error.slice(0, 500),
      next_attempt_at: sql`now() + make_interval(secs => ${retryInMs / 1000})`,
    })
    .where('id', 'in', ids)
    .where('done_at', 'is', null)
    .execute();
}

/**
 * What an organization's undone outbox entries are for: their kinds, and which of `subscriberIds` they name (in a
 * `subscriber` entry or among a `subscribers` entry's).
 */
export async function undoneOf(
  db: Kysely<Database>,
  organizationId: string,
  subscriberIds: readonly string[],
): Promise<{ kinds: Set<OutboxKind>; subscribers: Set<string> }> {
  const { rows } = await sql<{ kind: OutboxKind; subject: string | null }>`
    SELECT DISTINCT o.kind, named.subject FROM outbox o
    LEFT JOIN LATERAL (
      SELECT s AS subject FROM unnest(coalesce(o.subjects, ARRAY[o.subject])) AS s
      WHERE s = ANY(${subscriberIds}::text[])
    ) named ON true
    WHERE o.organization_id = ${organizationId} AND o.done_at IS NULL
  `.execute(db);
  return {
    kinds: new Set(rows.map((row) => row.kind)),
    subscribers: new Set(rows.flatMap((row) => (row.subject === null ? [] : [row.subject]))),
  };
}

/** Redis is back: every undone entry is due again at once, whatever its backoff said. */
export async function makeAllDue(db: Kysely<Database>): Promise<void> {
  await db
    .updateTable('outbox')
    .set({ next_attempt_at: sql`now()` })
    .where('done_at', 'is', null)
    .where('next_attempt_at', '>', sql<Date>`now()`)
    .execute();
}

/** Done entries older than `olderThanMs`, at most `limit` per call. */
export async function pruneDone(db: Kysely<Database>, olderThanMs: number, limit: number): Promise<number> {
  const result = await sql`
    DELETE FROM outbox WHERE id IN (
      SELECT id FROM outbox
      WHERE done_at IS NOT NULL AND done_at < now() - make_interval(secs => ${olderThanMs / 1000})
      LIMIT ${limit}
    )
  `.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

export interface OutboxLag {
  undone: number;
  /** Age of the oldest undone entry in seconds; 0 when there is none. */
  oldestAgeSeconds: number;
}

export async function outboxLag(db: Kysely<Database>): Promise<OutboxLag> {
  const row = await db
    .selectFrom('outbox')
    .select([
      sql<number>`count(*)::int`.as('undone'),
      sql<number>`coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8`.as('oldest'),
    ])
    .where('done_at', 'is', null)
    .executeTakeFirstOrThrow();
  return { undone: row.undone, oldestAgeSeconds: row.oldest };
}
