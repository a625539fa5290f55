import { isApiError } from '../api/errors.ts';

/** An error as the user sees it: the API's message, its code, and the request id to quote to support. */
export function ErrorNotice({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const message = error instanceof Error ? error.message : String(error);
  const apiError = isApiError(error) ? error : null;
  return (
    <div className="notice notice-error" role="alert" data-testid="error-notice">
      {title ? <strong>{title}: </strong> : null}
      <span>{message}</span>
      {apiError && apiError.retryAfter !== undefined ? (
        <span> Try again in {apiError.retryAfter} s.</span>
      ) : null}
      {apiError && apiError.status > 0 ? (
        <span className="notice-meta">
          {' '}
          ({apiError.status} {apiError.code}
          {apiError.requestId ? `, request ${apiError.requestId}` : ''})
        </span>
      ) : null}
    </div>
  );
}
