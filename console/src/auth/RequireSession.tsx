import type { ReactNode } from 'react';
import { Navigate, useLocation } from 'react-router';
import { isApiError } from '../api/errors.ts';
import { ErrorNotice } from '../components/ErrorNotice.tsx';
import { useForgetWhenLeft } from './leave.ts';
import { useSessionQuery } from './session.ts';

/** Renders its children only for a live session; without one, sends the user to sign in. */
export function RequireSession({ children }: { children: ReactNode }) {
  const session = useSessionQuery();
  const location = useLocation();
  useForgetWhenLeft();
  if (session.isPending) return <p className="loading">Loading…</p>;
  if (session.isError) {
    if (isApiError(session.error) && session.error.status === 401) {
      const next = `${location.pathname}${location.search}`;
      return <Navigate to={`/sign-in?next=${encodeURIComponent(next)}`} replace />;
    }
    return (
      <main className="auth-page">
        <ErrorNotice error={session.error} />
      </main>
    );
  }
  return <>{children}</>;
}
