import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database, ImportLineResult } from '@ent/common/db/database';
import { MAX_IMPORT_ERRORS } from '@ent/contract/imports';

type Db = Kysely<Database> | Transaction<Database>;

export interface StagedLine {
  line: number;
  type: string | null;
  key: string | null;
  /** The record for a line still to apply; null for one that already failed. */
  record: Record<string, unknown> | null;
  result: 'pending' | 'failed';
  error: Record<string, unknown> | null;
}

export interface LineResult {
  line: number;
  result: Exclude<ImportLineResult, 'pending'>;
  error: Record<string, unknown> | null;
}

const leaseExpiry = (leaseMs: number) => sql<Date>`now() + make_interval(secs => ${leaseMs / 1000})`;

export async function insertReceivingImport(
  db: Db,
  row: {
    id: string;
    organizationId: string;
    memberId: string;
    requestId: string;
    owner: string;
    leaseMs: number;
  },
): Promise<void> {
  await db
    .insertInto('imports')
    .values({
      id: row.id,
      organization_id: row.organizationId,
      member_id: row.memberId,
      request_id: row.requestId,
      status: 'receiving',
      dry_run: false,
      lease_owner: row.owner,
      lease_expires_at: leaseExpiry(row.leaseMs),
      finished_at: null,
      sha256: null,
      failure: null,
    })
    .execute();
}

/**
 * Appends staged lines, counting them on the import and holding its lease while the body streams in. The lines go as
 * one JSON document (one stringify here, one jsonb parse in Postgres), not as arrays: node-pg escapes every element
 * of an array literal, and Postgres parses each record again from it.
 */
export async function stageLines(
  db: Db,
  importId: string,
  lines: readonly StagedLine[],
  leaseMs: number,
): Promise<void> {
  if (lines.length === 0) return;
  const failed = lines.filter((line) => line.result === 'failed').length;
  await sql`
    WITH staged AS (
      INSERT INTO import_lines (import_id, line, type, key, record, result, error)
      SELECT ${importId}, l.line, l.type, l.key, l.record, l.result, l.error
      FROM jsonb_to_recordset(${JSON.stringify(lines)}::jsonb)
        AS l(line int, type text, key text, record jsonb, result text, error jsonb)
      RETURNING 1
    )
    UPDATE imports SET lines = lines + (SELECT count(*) FROM staged), failed = failed + ${failed},
      lease_expires_at = ${leaseExpiry(leaseMs)}
    WHERE id = ${importId}
  `.execute(db);
}

export async function deleteImport(db: Db, importId: string): Promise<void> {
  await db.deleteFrom('imports').where('id', '=', importId).execute();
}

/** The received import starts: true when it was still `receiving` (this request staged it). */
export async function startImport(
  trx: Transaction<Database>,
  importId: string,
  input: { sha256: string; dryRun: boolean; owner: string; leaseMs: number },
) {
  return trx
    .updateTable('imports')
    .set({
      status: 'running',
      sha256: input.sha256,
      dry_run: input.dryRun,
      lease_owner: input.owner,
      lease_expires_at: leaseExpiry(input.leaseMs),
    })
    .where('id', '=', importId)
    .where('status', '=', 'receiving')
    .returningAll()
    .executeTakeFirst();
}

/** The import, locked, when `owner` still holds its lease and it is running. */
export function lockLeasedImport(trx: Transaction<Database>, importId: string, owner: string) {
  return trx
    .selectFrom('imports')
    .selectAll()
    .where('id', '=', importId)
    .where('lease_owner', '=', owner)
    .where('status', '=', 'running')
    .forUpdate()
    .executeTakeFirst();
}

export interface PendingLine {
  line: number;
  type: string;
  record: Record<string, unknown>;
}

/**
 * The lines still to apply among the `span` line numbers after `after`. Bounded on both sides, so whatever plan the
 * statistics choose it reads at most `span` rows: with `line > after … ORDER BY line LIMIT n` alone, statistics from
 * before the body was staged (every line beyond their histogram) made Postgres read every line after the cursor
 * into a bitmap and sort it, for each batch (seconds per batch at a million lines: the import went quadratic).
 */
export function nextPendingLines(
  trx: Transaction<Database>,
  importId: string,
  after: number,
  span: number,
): Promise<PendingLine[]> {
  return trx
    .selectFrom('import_lines')
    .select(['line', 'type', 'record'])
    .where('import_id', '=', importId)
    .where('line', '>', after)
    .where('line', '<=', after + span)
    .where('result', '=', 'pending')
    .orderBy('line')
    .execute() as Promise<PendingLine[]>;
}

/** The import's last staged line number (0 when none): the primary key's end, one index probe. */
export async function lastStagedLine(trx: Transaction<Database>, importId: string): Promise<number> {
  const row = await trx
    .selectFrom('import_lines')
    .select((eb) => eb.fn.max('line').as('last'))
    .where('import_id', '=', importId)
    .executeTakeFirst();
  return Number(row?.last ?? 0);
}

/**
 * The batch's line results and the import's counters and cursor, in the batch's transaction. Only the results that
 * are not `applied` are written: a line the cursor has passed that is still `pending` was applied (see
 * `resultUnderCursor`), so the common case, a batch of new records, rewrites none of its staged lines.
 */
export async function recordBatch(
  trx: Transaction<Database>,
  importId: string,
  results: readonly LineResult[],
  through: number,
  leaseMs: number,
): Promise<void> {
  const count = (result: LineResult['result']) => results.filter((r) => r.result === result).length;
  const written = results.filter((r) => r.result !== 'applied');
  if (written.length > 0)
    await sql`
      UPDATE import_lines AS il SET result = r.result, error = r.error
      FROM unnest(${written.map((r) => r.line)}::int[], ${written.map((r) => r.result)}::text[],
        ${written.map((r) => (r.error === null ? null : JSON.stringify(r.error)))}::jsonb[]) AS r(line, result, error)
      WHERE il.import_id = ${importId} AND il.line = r.line
    `.execute(trx);
  await trx
    .updateTable('imports')
    .set({
      applied: sql`applied + ${count('applied')}`,
      unchanged: sql`unchanged + ${count('unchanged')}`,
      failed: sql`failed + ${count('failed')}`,
      applied_through: through,
      lease_expires_at: leaseExpiry(leaseMs),
    })
    .where('id', '=', importId)
    .execute();
}

/** A line's result: `pending` at or under the import's cursor is `applied` (recordBatch writes the others only). */
const resultUnderCursor = (appliedThrough: number) =>
  sql<ImportLineResult>`CASE WHEN result = 'pending' AND line <= ${appliedThrough} THEN 'applied' ELSE result END`;

export async function finishImport(
  db: Db,
  importId: string,
  owner: string | null,
  outcome: { status: 'succeeded' | 'failed'; failure: string | null },
): Promise<boolean> {
  let query = db
    .updateTable('imports')
    .set({
      status: outcome.status,
      failure: outcome.failure,
      finished_at: sql`now()`,
      lease_owner: null,
      lease_expires_at: null,
    })
    .where('id', '=', importId)
    .where('status', 'in', ['receiving', 'running']);
  // Without an owner: only an import whose lease has expired (its process died).
  query =
    owner !== null
      ? query.where('lease_owner', '=', owner)
      : query.where('lease_expires_at', '<', sql<Date>`now()`);
  const result = await query.executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Takes over a running import whose lease expired (its process died): true when `owner` now holds it. */
export async function takeExpiredLease(
  db: Db,
  importId: string,
  owner: string,
  leaseMs: number,
): Promise<boolean> {
  const result = await db
    .updateTable('imports')
    .set({ lease_owner: owner, lease_expires_at: leaseExpiry(leaseMs) })
    .where('id', '=', importId)
    .where('status', '=', 'running')
    .where('lease_expires_at', '<', sql<Date>`now()`)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Imports whose process died: running ones to resume, receiving ones (their body is gone with it) to fail. */
export function findAbandonedImports(db: Db, limit = 100) {
  return db
    .selectFrom('imports')
    .select(['id', 'status'])
    .where('status', 'in', ['receiving', 'running'])
    .where('lease_expires_at', '<', sql<Date>`now()`)
    .orderBy('lease_expires_at')
    .limit(limit)
    .execute();
}

export function findImport(db: Db, organizationId: string, importId: string) {
  return db
    .selectFrom('imports')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('id', '=', importId)
    .executeTakeFirst();
}

export function firstErrors(db: Db, importId: string) {
  return db
    .selectFrom('import_lines')
    .select(['line', 'error'])
    .where('import_id', '=', importId)
    .where('result', '=', 'failed')
    .orderBy('line')
    .limit(MAX_IMPORT_ERRORS)
    .execute();
}

export function listLines(
  db: Db,
  importId: string,
  appliedThrough: number,
  filter: { limit: number; startingAfter?: number; result?: ImportLineResult },
) {
  let query = db
    .selectFrom('import_lines')
    .select(['line', 'type', 'key', resultUnderCursor(appliedThrough).as('result'), 'error'])
    .where('import_id', '=', importId);
  if (filter.startingAfter !== undefined) query = query.where('line', '>', filter.startingAfter);
  // A line its batch has not reached yet has no result to list.
  if (filter.result === undefined)
    query = query.where((eb) => eb.or([eb('result', '<>', 'pending'), eb('line', '<=', appliedThrough)]));
  else if (filter.result === 'applied')
    query = query.where('result', '=', 'pending').where('line', '<=', appliedThrough);
  else query = query.where('result', '=', filter.result);
  return query
    .orderBy('line')
    .limit(filter.limit + 1)
    .execute();
}

/**
 * The plans this import archives at its end (every line is under the cursor then, so `pending` is applied): those
 * whose last applied line that sets `archived` sets it true (an absent `archived` leaves the plan as it is).
 */
export async function plansArchivedBy(db: Db, importId: string): Promise<string[]> {
  const { rows } = await sql<{ key: string }>`
    SELECT key FROM (
      SELECT DISTINCT ON (key) key, record FROM import_lines
      WHERE import_id = ${importId} AND type = 'plan' AND result IN ('pending', 'unchanged')
        AND record ? 'archived'
      ORDER BY key, line DESC
    ) AS last
    WHERE (last.record ->> 'archived')::boolean
    ORDER BY key
  `.execute(db);
  return rows.map((row) => row.key);
}
