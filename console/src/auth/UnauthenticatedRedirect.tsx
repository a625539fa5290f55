import { useQueryClient } from '@tanstack/react-query';
import { useEffect } from 'react';
import { useNavigate } from 'react-router';
import { setCsrfToken, setUnauthenticatedHandler } from '../api/client.ts';
import { currentAppPath } from '../basename.ts';

/** Any 401 on a session route means the session ended: forget everything loaded and go to sign-in. */
export function UnauthenticatedRedirect() {
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  useEffect(() => {
    setUnauthenticatedHandler(() => {
      const next = currentAppPath();
      setCsrfToken(null);
      queryClient.clear();
      navigate(`/sign-in?next=${encodeURIComponent(next)}`, { replace: true });
    });
    return () => setUnauthenticatedHandler(null);
  }, [navigate, queryClient]);
  return null;
}
