import { ErrorNotice } from './ErrorNotice.tsx';

/** What a query shows before it has data: a line while loading, the error when it failed. */
export function QueryState({ isPending, error, what }: { isPending: boolean; error: unknown; what: string }) {
  if (error) return <ErrorNotice error={error} title={`Could not load ${what}`} />;
  if (isPending) return <p className="loading">Loading {what}…</p>;
  return null;
}
