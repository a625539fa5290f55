import { useEffect } from 'react';
import { setCsrfToken, setUnauthenticatedHandler } from '../api/client.ts';
import { currentAppPath } from '../basename.ts';
import { useLeaveSignedIn } from './leave.ts';

/** Any 401 on a session route means the session ended: go to sign-in, and forget everything loaded (auth/leave.ts). */
export function UnauthenticatedRedirect() {
  const leave = useLeaveSignedIn();
  useEffect(() => {
    setUnauthenticatedHandler(() => {
      setCsrfToken(null);
      leave(`/sign-in?next=${encodeURIComponent(currentAppPath())}`, 'session-ended');
    });
    return () => setUnauthenticatedHandler(null);
  }, [leave]);
  return null;
}
