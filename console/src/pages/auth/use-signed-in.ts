import { useQueryClient } from '@tanstack/react-query';
import { useNavigate, useSearchParams } from 'react-router';
import type { Session } from '../../api/types.ts';
import { SESSION_KEY } from '../../auth/session.ts';

/** After sign-up, sign-in or joining: the new session is the session, and the app opens (at `next`). */
export function useSignedIn(): (session: Session) => void {
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const [params] = useSearchParams();
  return (session) => {
    queryClient.clear();
    queryClient.setQueryData(SESSION_KEY, session);
    const next = params.get('next');
    // Only a path inside the console, never another origin.
    navigate(next && next.startsWith('/') && !next.startsWith('//') ? next : '/', { replace: true });
  };
}
