import type { AuditEvent } from '../../api/types.ts';
import { describe, detailRows } from './changes.ts';

/** What an entry changed, each field as from → to; a create lists what it created. */
export function AuditDetails({ event }: { event: AuditEvent }) {
  const rows = detailRows(event.details);
  return (
    <div className="audit-details" data-testid={`audit-details-${event.id}`}>
      {rows.length === 0 ? (
        <p className="cell-muted">
          No details: {event.details === null ? 'nothing changed, or a delete' : 'empty'}.
        </p>
      ) : (
        <table className="table table-compact">
          <thead>
            <tr>
              <th>Field</th>
              <th>From</th>
              <th aria-hidden="true" />
              <th>To</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.path}>
                <td>
                  <code>{row.path}</code>
                </td>
                {row.kind === 'change' ? (
                  <>
                    <td className="change-from">{describe(row.from)}</td>
                    <td aria-hidden="true">→</td>
                    <td className="change-to">{describe(row.to)}</td>
                  </>
                ) : row.kind === 'too_large' ? (
                  <td colSpan={3} className="cell-muted">
                    too large to record
                  </td>
                ) : (
                  <>
                    <td className="cell-muted">created</td>
                    <td aria-hidden="true">→</td>
                    <td className="change-to">{describe(row.value)}</td>
                  </>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <dl className="facts facts-inline">
        <dt>Request</dt>
        <dd>
          <code>{event.request_id}</code>
        </dd>
        <dt>Service</dt>
        <dd>{event.service}</dd>
        <dt>IP</dt>
        <dd>{event.ip}</dd>
        <dt>User agent</dt>
        <dd className="cell-muted">{event.user_agent ?? '—'}</dd>
      </dl>
    </div>
  );
}
