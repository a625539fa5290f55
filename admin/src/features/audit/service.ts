import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { AppError } from '@ent/common/errors/app-error';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';
import { WriteOutcome } from '../shared/write/outcome.ts';
import {
  appendOutcome,
  auditEntryExists,
  insertPendingEntry,
  listAuditEntries,
  type AuditListFilter,
  type NewAuditEntry,
} from './store.ts';

type AuditEntryRow = Awaited<ReturnType<typeof listAuditEntries>>[number];

/** The organization's audit log, newest first, filtered, one page. */
export function listAuditEvents(
  db: Kysely<Database>,
  organizationId: string,
  request: PageRequest<AuditListFilter>,
): Promise<Page<AuditEntryRow>> {
  return paginate(
    request,
    { find: (id) => auditEntryExists(db, organizationId, id), what: 'an audit entry of this organization' },
    (filter) => listAuditEntries(db, organizationId, filter),
  );
}

/**
 * A write made outside HTTP (the operator's `entctl`), audited as the route it stands for is: its pending entry
 * first, then the write, then the outcome (`status` with the write's details, or the error's status and none).
 */
export async function auditedWrite<T>(
  db: Kysely<Database>,
  entry: NewAuditEntry,
  status: number,
  write: (outcome: WriteOutcome) => Promise<T>,
): Promise<T> {
  await insertPendingEntry(db, entry);
  const settle = (status: number, details: WriteOutcome['details']) =>
    appendOutcome(db, {
      eventId: entry.id,
      organizationId: entry.organizationId,
      outcome: 'responded',
      status,
      details,
    });
  try {
    const outcome = new WriteOutcome();
    const result = await write(outcome);
    await settle(status, outcome.details);
    return result;
  } catch (error) {
    await settle(error instanceof AppError ? error.status : 500, null);
    throw error;
  }
}
