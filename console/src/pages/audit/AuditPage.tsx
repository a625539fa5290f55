import { useInfiniteQuery, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { accessApi } from '../../api/access.ts';
import { auditApi } from '../../api/audit.ts';
import { usePermissions } from '../../auth/session.ts';
import { DataTable } from '../../components/DataTable.tsx';
import { counted } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { LoadMore } from '../../components/LoadMore.tsx';
import { PageHeader } from '../../components/PageHeader.tsx';
import { AuditFiltersForm } from './AuditFiltersForm.tsx';
import { AuditRow } from './AuditRow.tsx';
import { auditCsv, auditJson, download } from './export.ts';
import { NO_FILTERS, queryOf, type AuditFilters } from './filters.ts';

const PAGE_SIZE = 50;

export function AuditPage() {
  const can = usePermissions();
  if (!can.readAudit) {
    return (
      <>
        <PageHeader title="Audit log" />
        <div className="notice notice-error" role="alert">
          Only admins read the audit log.
        </div>
      </>
    );
  }
  return <AuditLog />;
}

function AuditLog() {
  const [filters, setFilters] = useState<AuditFilters>(NO_FILTERS);
  const members = useQuery({ queryKey: ['members', 'all'], queryFn: () => accessApi.members({}) });
  const events = useInfiniteQuery({
    queryKey: ['audit', filters],
    queryFn: ({ pageParam }) =>
      auditApi.list({ ...queryOf(filters), limit: PAGE_SIZE, starting_after: pageParam }),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => (page.has_more ? page.audit_events.at(-1)?.id : undefined),
  });
  const loaded = events.data?.pages.flatMap((page) => page.audit_events) ?? [];
  const names = new Map(
    (members.data?.members ?? []).map((m) => [m.member_id, m.email ?? m.name ?? m.member_id]),
  );
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');

  return (
    <>
      <PageHeader
        title="Audit log"
        description="Every write under /org, newest first, with who made it and what changed."
        actions={
          <>
            <button
              type="button"
              className="button"
              disabled={loaded.length === 0}
              onClick={() => download(`audit-${stamp}.csv`, auditCsv(loaded), 'text/csv')}
            >
              Export CSV
            </button>
            <button
              type="button"
              className="button"
              disabled={loaded.length === 0}
              onClick={() => download(`audit-${stamp}.json`, auditJson(loaded), 'application/json')}
            >
              Export JSON
            </button>
          </>
        }
      />
      <AuditFiltersForm members={members.data?.members ?? []} onApply={setFilters} />
      <QueryState isPending={events.isPending} error={events.error} what="the audit log" />
      {events.data ? (
        <>
          <p className="cell-muted" data-testid="audit-loaded">
            {counted(loaded.length, 'entry', 'entries')} loaded
            {events.hasNextPage ? '; older entries follow' : ''}. Exports hold the loaded entries.
          </p>
          <DataTable
            testId="audit-table"
            columns={5}
            empty={loaded.length === 0 && 'No entries match.'}
            head={
              <>
                <th>When</th>
                <th>Actor</th>
                <th>Request</th>
                <th>Outcome</th>
                <th aria-label="Details" />
              </>
            }
          >
            {loaded.map((event) => (
              <AuditRow key={event.id} event={event} actorName={names.get(event.actor.member_id)} />
            ))}
          </DataTable>
        </>
      ) : null}
      <LoadMore query={events} label="Load older entries" loadingLabel="Loading…" />
    </>
  );
}
