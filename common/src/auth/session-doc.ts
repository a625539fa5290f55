import type { Role } from './scopes.ts';

/**
 * A live console session as admin tells a gateway (`POST /internal/session`, asked on every request that
 * carries one): who it is, and the hash its CSRF token must match on a write.
 */
export interface SessionDoc {
  organizationId: string;
  memberId: string;
  sessionId: string;
  keyPrefix: string;
  role: Role;
  csrfHash: string;
}
