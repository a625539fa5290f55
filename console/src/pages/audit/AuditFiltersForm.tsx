import { useState, type FormEvent } from 'react';
import type { Member } from '../../api/types.ts';
import { Field } from '../../components/Field.tsx';
import { NO_FILTERS, type AuditFilters } from './filters.ts';

const OUTCOMES = ['responded', 'rejected', 'pending', 'no_response'];
const METHODS = ['POST', 'PUT', 'PATCH', 'DELETE', 'GET'];

export function AuditFiltersForm({
  members,
  onApply,
}: {
  members: readonly Member[];
  onApply: (filters: AuditFilters) => void;
}) {
  const [draft, setDraft] = useState<AuditFilters>(NO_FILTERS);
  const set = (name: keyof AuditFilters) => (event: { target: { value: string } }) =>
    setDraft((current) => ({ ...current, [name]: event.target.value }));
  const submit = (event: FormEvent) => {
    event.preventDefault();
    onApply(draft);
  };
  return (
    <form className="panel form filters" onSubmit={submit} aria-label="Audit filters">
      <div className="form-grid form-grid-dense">
        <Field label="Actor">
          {(props) => (
            <select {...props} value={draft.actor_member_id} onChange={set('actor_member_id')}>
              <option value="">anyone</option>
              {members.map((member) => (
                <option key={member.member_id} value={member.member_id}>
                  {member.email ?? member.name ?? member.member_id} (
                  {member.kind === 'user' ? member.role : 'service account'})
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Outcome">
          {(props) => (
            <select {...props} value={draft.outcome} onChange={set('outcome')}>
              <option value="">any</option>
              {OUTCOMES.map((o) => (
                <option key={o}>{o}</option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Method">
          {(props) => (
            <select {...props} value={draft.method} onChange={set('method')}>
              <option value="">any</option>
              {METHODS.map((m) => (
                <option key={m}>{m}</option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Service">
          {(props) => (
            <select {...props} value={draft.service} onChange={set('service')}>
              <option value="">any</option>
              <option value="api">api</option>
              <option value="identity">identity</option>
            </select>
          )}
        </Field>
        <Field label="Route template">
          {(props) => (
            <input {...props} value={draft.route} onChange={set('route')} placeholder="/org/plans/{key}" />
          )}
        </Field>
        <Field label="Path value name">
          {(props) => (
            <input {...props} value={draft.param_name} onChange={set('param_name')} placeholder="key" />
          )}
        </Field>
        <Field label="Path value">
          {(props) => (
            <input {...props} value={draft.param_value} onChange={set('param_value')} placeholder="pro" />
          )}
        </Field>
        <Field label="Request id">
          {(props) => (
            <input {...props} value={draft.request_id} onChange={set('request_id')} placeholder="req_…" />
          )}
        </Field>
        <Field label="Occurred after">
          {(props) => (
            <input
              {...props}
              type="datetime-local"
              value={draft.occurred_after}
              onChange={set('occurred_after')}
            />
          )}
        </Field>
        <Field label="Occurred before">
          {(props) => (
            <input
              {...props}
              type="datetime-local"
              value={draft.occurred_before}
              onChange={set('occurred_before')}
            />
          )}
        </Field>
      </div>
      <div className="form-actions">
        <button type="submit" className="button button-primary button-small">
          Apply filters
        </button>
        <button
          type="button"
          className="button button-small"
          onClick={() => {
            setDraft(NO_FILTERS);
            onApply(NO_FILTERS);
          }}
        >
          Clear
        </button>
      </div>
    </form>
  );
}
