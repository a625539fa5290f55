import { useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect } from 'react';
import { useNavigate } from 'react-router';

/**
 * Leaving the signed-in frame (sign-out, or a 401 once the session ended elsewhere): go to sign-in first, and
 * forget everything loaded only once the frame (RequireSession) has unmounted. Clearing the cache while the frame
 * is still rendered would make its next render (a mutation settling, a query failing) find no session, and
 * useSession() would throw in the middle of a render, an error React reports on every sign-out.
 */
let leaving = false;
let framesMounted = 0;

/** Why the signed-in frame was left: told on the page it leaves for (components/LeftNotice.tsx). */
export type LeftReason = 'signed-out' | 'session-ended';
interface LeftState {
  left: LeftReason;
}

/** The reason in a location's state, when it came from useLeaveSignedIn. */
export function leftReasonOf(state: unknown): LeftReason | null {
  const left = typeof state === 'object' && state !== null ? (state as Partial<LeftState>).left : undefined;
  return left === 'signed-out' || left === 'session-ended' ? left : null;
}

/**
 * Navigates (replacing) to `to`, with `reason` in the location's state, a page outside the signed-in frame, and forgets the cache once the frame is gone.
 * Does nothing while leaving already or when no frame is shown: a second 401 of the same ending (several requests
 * were in flight), or one answered after the frame was left, would otherwise send sign-in to itself as `next`.
 */
export function useLeaveSignedIn(): (to: string, reason: LeftReason) => void {
  const navigate = useNavigate();
  return useCallback(
    (to: string, reason: LeftReason) => {
      if (leaving || framesMounted === 0) return;
      leaving = true;
      navigate(to, { replace: true, state: { left: reason } satisfies LeftState });
    },
    [navigate],
  );
}

/** Called by the signed-in frame: once it unmounts after useLeaveSignedIn, the cache is cleared. */
export function useForgetWhenLeft(): void {
  const queryClient = useQueryClient();
  useEffect(() => {
    framesMounted += 1;
    return () => {
      framesMounted -= 1;
      if (leaving && framesMounted === 0) {
        leaving = false;
        queryClient.clear();
      }
    };
  }, [queryClient]);
}
