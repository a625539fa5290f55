import { useState, type FormEvent } from 'react';
import type { Member } from '../../api/types.ts';
import { SelectField } from '../../components/SelectField.tsx';
import { TextField } from '../../components/TextField.tsx';
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
  const set = (name: keyof AuditFilters) => (value: string) =>
    setDraft((current) => ({ ...current, [name]: value }));
  const submit = (event: FormEvent) => {
    event.preventDefault();
    onApply(draft);
  };
  return (
    <form className="panel form filters" onSubmit={submit} aria-label="Audit filters">
      <div className="form-grid form-grid-dense">
        <SelectField label="Actor" value={draft.actor_member_id} onChange={set('actor_member_id')}>
          <option value="">anyone</option>
          {members.map((member) => (
            <option key={member.member_id} value={member.member_id}>
              {member.email ?? member.name ?? member.member_id} (
              {member.kind === 'user' ? member.role : 'service account'})
            </option>
          ))}
        </SelectField>
        <SelectField label="Outcome" value={draft.outcome} onChange={set('outcome')}>
          <option value="">any</option>
          {OUTCOMES.map((o) => (
            <option key={o}>{o}</option>
          ))}
        </SelectField>
        <SelectField label="Method" value={draft.method} onChange={set('method')}>
          <option value="">any</option>
          {METHODS.map((m) => (
            <option key={m}>{m}</option>
          ))}
        </SelectField>
        <SelectField label="Service" value={draft.service} onChange={set('service')}>
          <option value="">any</option>
          <option value="api">api</option>
          <option value="identity">identity</option>
        </SelectField>
        <TextField
          label="Route template"
          value={draft.route}
          onChange={set('route')}
          placeholder="/org/plans/{key}"
        />
        <TextField
          label="Path value name"
          value={draft.param_name}
          onChange={set('param_name')}
          placeholder="key"
        />
        <TextField
          label="Path value"
          value={draft.param_value}
          onChange={set('param_value')}
          placeholder="pro"
        />
        <TextField
          label="Request id"
          value={draft.request_id}
          onChange={set('request_id')}
          placeholder="req_…"
        />
        <TextField
          label="Occurred after"
          type="datetime-local"
          value={draft.occurred_after}
          onChange={set('occurred_after')}
        />
        <TextField
          label="Occurred before"
          type="datetime-local"
          value={draft.occurred_before}
          onChange={set('occurred_before')}
        />
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
