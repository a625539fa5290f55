import type { Kysely } from 'kysely';
import type { Database, ImportLineResult } from '@ent/common/db/database';
import { notFound } from '@ent/common/errors/app-error';
import type { ImportBody, ImportRecordType } from '@ent/contract/imports';
import { findImport, firstErrors, listLines } from './store.ts';

type ImportRow = NonNullable<Awaited<ReturnType<typeof findImport>>>;
type ErrorObject = ImportBody['errors'][number]['error'];

const importNotFound = (importId: string) =>
  notFound(`No import with id "${importId}".`, { field: 'import_id', value: importId });

/** `receiving` is the time before the 202: an import the API names is running by then. */
const statusOf = (row: ImportRow): ImportBody['status'] =>
  row.status === 'receiving' ? 'running' : row.status;

export async function getImport(
  db: Kysely<Database>,
  organizationId: string,
  importId: string,
): Promise<ImportBody> {
  const row = await findImport(db, organizationId, importId);
  if (!row || row.status === 'receiving') throw importNotFound(importId);
  const errors = await firstErrors(db, importId);
  return {
    import_id: row.id,
    status: statusOf(row),
    dry_run: row.dry_run,
    lines: row.lines,
    applied: row.applied,
    unchanged: row.unchanged,
    failed: row.failed,
    errors: errors.map((e) => ({ line: e.line, error: e.error as unknown as ErrorObject })),
    sha256: row.sha256,
    created_at: row.created_at.toISOString(),
    finished_at: row.finished_at ? row.finished_at.toISOString() : null,
    ...(row.failure === null ? {} : { failure: row.failure }),
  };
}

export async function listImportLines(
  db: Kysely<Database>,
  organizationId: string,
  importId: string,
  filter: { limit: number; startingAfter?: number; result?: Exclude<ImportLineResult, 'pending'> },
) {
  const row = await findImport(db, organizationId, importId);
  if (!row || row.status === 'receiving') throw importNotFound(importId);
  const rows = await listLines(db, importId, row.applied_through, filter);
  const page = rows.slice(0, filter.limit);
  return {
    lines: page.map((line) => ({
      line: line.line,
      type: line.type as ImportRecordType | null,
      key: line.key,
      result: line.result as Exclude<ImportLineResult, 'pending'>,
      ...(line.error === null ? {} : { error: line.error as unknown as ErrorObject }),
    })),
    has_more: rows.length > filter.limit,
  };
}

/** Staging and starting an import, for the route (receive.ts stages the lines themselves). */
export { deleteImport, insertReceivingImport, startImport } from './store.ts';
