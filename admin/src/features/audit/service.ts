import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';
import { auditEntryExists, listAuditEntries, type AuditListFilter } from './store.ts';

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

/** A write made outside HTTP (entctl) is audited as its route is: the pending entry first, then the outcome. */
export { appendOutcome, insertPendingEntry } from './store.ts';
