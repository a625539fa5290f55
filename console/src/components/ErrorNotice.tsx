import { errorPresentation } from '../api/errors.ts';

/**
 * An error as the user sees it: one sentence (api/errors.ts, errorPresentation), with the status, code and request
 * id to quote to support behind a Details toggle.
 */
export function ErrorNotice({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const { sentence, details } = errorPresentation(error);
  return (
    <div className="notice notice-error" role="alert" data-testid="error-notice">
      {title ? <strong>{title}: </strong> : null}
      <span data-testid="error-sentence">{sentence}</span>
      {details.length > 0 ? (
        <details className="notice-details" data-testid="error-details">
          <summary>Details</summary>
          <dl>
            {details.map(({ label, value }) => (
              <div key={label}>
                <dt>{label}</dt>
                <dd>
                  <code>{value}</code>
                </dd>
              </div>
            ))}
          </dl>
        </details>
      ) : null}
    </div>
  );
}
