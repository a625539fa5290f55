import { useLocation } from 'react-router';
import { leftReasonOf, type LeftReason } from '../auth/leave.ts';

const SENTENCES: Record<LeftReason, string> = {
  'signed-out': 'You are signed out.',
  'session-ended': 'Your session has ended. Sign in again to continue.',
};

/**
 * Above the sign-in page, why the signed-in frame was left (auth/leave.ts): the user's own sign-out, or a session
 * that ended elsewhere (expired, signed out in another tab, a password change, a suspension). Nothing when the
 * page was opened directly.
 */
export function LeftNotice() {
  const reason = leftReasonOf(useLocation().state);
  if (!reason) return null;
  return (
    <div
      className="notice notice-success page-banner"
      role="status"
      data-testid="left-notice"
      data-reason={reason}
    >
      {SENTENCES[reason]}
    </div>
  );
}
