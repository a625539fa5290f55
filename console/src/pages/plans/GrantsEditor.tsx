import type { Feature, MeteredReset, MeteredResetAnchor } from '../../api/types.ts';
import { ANCHOR_CHOICES, RESET_CHOICES } from '../../components/metered-terms.ts';
import { EMPTY_ROW, type GrantDraft, type GrantDraftRow } from './grant-draft.ts';

/**
 * One row per catalog feature: granted or not; for a limit or metered feature its value (or unlimited); for a
 * metered one also when it resets, what its periods are anchored on, and whether the limit is soft.
 */
export function GrantsEditor({
  features,
  draft,
  problems,
  onChange,
  planLabel,
}: {
  features: readonly Feature[];
  draft: GrantDraft;
  problems: Record<string, string>;
  onChange: (draft: GrantDraft) => void;
  planLabel: string;
}) {
  if (features.length === 0)
    return <p className="cell-muted">The catalog has no features yet: create some first.</p>;
  const update = (key: string, change: Partial<GrantDraftRow>) => {
    const row = draft[key] ?? EMPTY_ROW;
    onChange({ ...draft, [key]: { ...row, ...change } });
  };
  const anyMetered = features.some((feature) => feature.kind === 'metered');
  return (
    <table className="table table-compact grants-editor" aria-label={`Grants of ${planLabel}`}>
      <thead>
        <tr>
          <th>Granted</th>
          <th>Feature</th>
          <th>Kind</th>
          <th>Limit</th>
          {anyMetered ? <th>Period (metered)</th> : null}
        </tr>
      </thead>
      <tbody>
        {features.map((feature) => {
          const row = draft[feature.key] ?? EMPTY_ROW;
          const problem = problems[feature.key];
          return (
            <tr key={feature.key}>
              <td>
                <input
                  type="checkbox"
                  aria-label={`Grant ${feature.key}`}
                  checked={row.granted}
                  onChange={(e) => update(feature.key, { granted: e.target.checked })}
                />
              </td>
              <td>
                <code>{feature.key}</code> <span className="cell-muted">{feature.name}</span>
              </td>
              <td>{feature.kind}</td>
              <td>
                {feature.kind === 'flag' ? (
                  <span className="cell-muted">—</span>
                ) : (
                  <span className="limit-input">
                    <input
                      type="text"
                      inputMode="numeric"
                      aria-label={`Limit of ${feature.key}`}
                      aria-invalid={Boolean(problem)}
                      disabled={!row.granted || row.unlimited}
                      value={row.unlimited ? '' : row.limit}
                      onChange={(e) => update(feature.key, { limit: e.target.value })}
                    />
                    <label className="checkbox">
                      <input
                        type="checkbox"
                        aria-label={`Unlimited ${feature.key}`}
                        disabled={!row.granted}
                        checked={row.unlimited}
                        onChange={(e) => update(feature.key, { unlimited: e.target.checked })}
                      />
                      unlimited
                    </label>
                    {problem ? <small className="field-error">{problem}</small> : null}
                  </span>
                )}
              </td>
              {anyMetered ? (
                <td>
                  {feature.kind === 'metered' ? (
                    <MeteredTermsInputs
                      featureKey={feature.key}
                      row={row}
                      onChange={(change) => update(feature.key, change)}
                    />
                  ) : (
                    <span className="cell-muted">—</span>
                  )}
                </td>
              ) : null}
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function MeteredTermsInputs({
  featureKey,
  row,
  onChange,
}: {
  featureKey: string;
  row: GrantDraftRow;
  onChange: (change: Partial<GrantDraftRow>) => void;
}) {
  return (
    <span className="metered-terms-input">
      <label className="inline-label">
        resets{' '}
        <select
          aria-label={`Reset of ${featureKey}`}
          disabled={!row.granted}
          value={row.reset}
          onChange={(e) => onChange({ reset: e.target.value as MeteredReset })}
        >
          {RESET_CHOICES.map((choice) => (
            <option key={choice.value} value={choice.value}>
              {choice.label}
            </option>
          ))}
        </select>
      </label>
      <label className="inline-label">
        from{' '}
        <select
          aria-label={`Reset anchor of ${featureKey}`}
          disabled={!row.granted}
          value={row.resetAnchor}
          onChange={(e) => onChange({ resetAnchor: e.target.value as MeteredResetAnchor })}
        >
          {ANCHOR_CHOICES.map((choice) => (
            <option key={choice.value} value={choice.value}>
              {choice.label}
            </option>
          ))}
        </select>
      </label>
      <label className="checkbox" title="Use beyond the limit is allowed and shown as overage">
        <input
          type="checkbox"
          aria-label={`Soft limit ${featureKey}`}
          disabled={!row.granted}
          checked={row.soft}
          onChange={(e) => onChange({ soft: e.target.checked })}
        />
        soft
      </label>
    </span>
  );
}
