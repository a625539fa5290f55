import type { Feature } from '../../api/types.ts';
import type { GrantDraft, GrantDraftRow } from './grant-draft.ts';

/** One row per catalog feature: granted or not, and for a limit its value (or unlimited). */
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
    const row = draft[key] ?? { granted: false, unlimited: false, limit: '' };
    onChange({ ...draft, [key]: { ...row, ...change } });
  };
  return (
    <table className="table table-compact grants-editor" aria-label={`Grants of ${planLabel}`}>
      <thead>
        <tr>
          <th>Granted</th>
          <th>Feature</th>
          <th>Kind</th>
          <th>Limit</th>
        </tr>
      </thead>
      <tbody>
        {features.map((feature) => {
          const row = draft[feature.key] ?? { granted: false, unlimited: false, limit: '' };
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
                {feature.kind === 'limit' ? (
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
                ) : (
                  <span className="cell-muted">—</span>
                )}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
