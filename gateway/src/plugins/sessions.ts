import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { AuthFailureLimiter, authRateLimited } from '@ent/common/auth/failure-limiter';
import { sessionPrincipal, type SessionPrincipal } from '@ent/common/auth/scopes';
import { hashSessionToken, isWellFormedSessionToken } from '@ent/common/auth/session-token';
import { serviceUnavailable, unauthenticated } from '@ent/common/errors/app-error';
import { AdminUnavailableError } from './admin-client.ts';
import type { KnownKey } from './principals.ts';

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

const sessionEnded = () => unauthenticated('The console session has ended; sign in again.');

/**
 * Console sessions on the eval routes (the console's "what this subscriber gets" panel). Only requests without
 * a key get here, so the API-key path is untouched; each costs an admin round trip, which the console's few
 * requests afford.
 */
export const sessions = fp(
  async function sessions(app: FastifyInstance) {
    const failures = new AuthFailureLimiter(app.config.authFailuresPerMinute, () => app.clock.now());
    const service: Sessions = {
      async authenticate(token, clientIp) {
        if (!isWellFormedSessionToken(token)) throw sessionEnded();
        const retryAfter = failures.beforeLookup(clientIp);
        if (retryAfter > 0) throw authRateLimited(retryAfter);
        const tokenHash = hashSessionToken(token);
        let doc;
        try {
          doc = await app.adminClient.session(tokenHash);
        } catch (error) {
          failures.notAFailure(clientIp); // not the client's failure
          if (error instanceof AdminUnavailableError)
            throw serviceUnavailable('Sessions cannot be checked right now; retry shortly.');
          throw error;
        }
        if (!doc) throw sessionEnded();
        failures.notAFailure(clientIp);
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
