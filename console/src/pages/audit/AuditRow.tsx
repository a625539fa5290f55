import { useState } from 'react';
import type { AuditEvent } from '../../api/types.ts';
import { Badge, type BadgeTone } from '../../components/Badge.tsx';
import { formatTime } from '../../components/format.ts';
import { AuditDetails } from './AuditDetails.tsx';

const outcomeTone = (event: AuditEvent): BadgeTone => {
  if (event.outcome === 'rejected') return 'bad';
  if (event.outcome !== 'responded') return 'warn';
  return event.status !== null && event.status < 300 ? 'good' : 'bad';
};

export function AuditRow({ event, actorName }: { event: AuditEvent; actorName: string | undefined }) {
  const [open, setOpen] = useState(false);
  const params = Object.entries(event.params);
  return (
    <>
      <tr data-testid="audit-row" data-route={event.route} data-auth-type={event.actor.auth_type}>
        <td className="cell-nowrap">{formatTime(event.occurred_at)}</td>
        <td>
          <div>{actorName ?? <code>{event.actor.member_id}</code>}</div>
          <div className="cell-muted">
            {event.actor.auth_type} · <code>{event.actor.key_prefix}</code>
          </div>
        </td>
        <td>
          <span className="method">{event.method}</span> <code>{event.route}</code>
          {params.length > 0 ? (
            <div className="cell-muted">
              {params.map(([name, value]) => (
                <span key={name} className="param">
                  {name}=<code>{value}</code>
                </span>
              ))}
            </div>
          ) : null}
        </td>
        <td>
          <Badge tone={outcomeTone(event)}>
            {event.outcome}
            {event.status !== null ? ` ${event.status}` : ''}
          </Badge>
        </td>
        <td className="cell-actions">
          <button
            type="button"
            className="button button-small"
            aria-expanded={open}
            onClick={() => setOpen(!open)}
          >
            {open ? 'Hide details' : 'Details'}
          </button>
        </td>
      </tr>
      {open ? (
        <tr className="row-details">
          <td colSpan={5}>
            <AuditDetails event={event} />
          </td>
        </tr>
      ) : null}
    </>
  );
}
