import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { AuthFailureLimiter } from '@ent/common/auth/failure-limiter';
import { sessionPrincipal, type SessionPrincipal } from '@ent/common/auth/scopes';
import { lookUpSession } from '@ent/common/auth/session-lookup';
import { hashSessionToken } from '@ent/common/auth/session-token';
import type { KnownKey } from '../../plugins/principals.ts';

/** A console session checked for one request, and the hash its CSRF token must match on a write. */
export interface CheckedSession {
  known: KnownKey<SessionPrincipal>;
  csrfHash: string;
}

export interface Sessions {
  /**
   * The live session of a cookie's token, asked of admin on every call (nothing is cached: a sign-out, a password
   * change or a suspension wins on the next request). 401 when malformed or ended, 429 before asking when the
   * client's address is out of failed lookups, 503 when admin cannot say.
   */
  authenticate(token: string, clientIp: string): Promise<CheckedSession>;
}

declare module 'fastify' {
  interface FastifyInstance {
    sessions: Sessions;
  }
}

/**
 * Console sessions on the eval routes (the console's "what this subscriber gets" panel). Only requests without
 * a key get here, so the API-key path is untouched; each costs an admin round trip, which the console's few
 * requests afford.
 */
export const sessions = fp(
  async function sessions(app: FastifyInstance) {
    const failures = new AuthFailureLimiter(app.config, () => app.clock.now());
    const service: Sessions = {
      async authenticate(token, clientIp) {
        const tokenHash = hashSessionToken(token);
        const doc = await lookUpSession(token, clientIp, failures, () => app.adminClient.session(tokenHash));
        const principal = sessionPrincipal(doc);
        const known: KnownKey<SessionPrincipal> = {
          keyHash: tokenHash,
          principal,
          organizationId: principal.organizationId,
          version: 0,
          forgetAt: null,
          confirmedAt: app.clock.now(),
          session: true,
        };
        return { known, csrfHash: doc.csrfHash };
      },
    };
    app.decorate('sessions', service);
  },
  { name: 'sessions', dependencies: ['infrastructure', 'admin-client'] },
);
