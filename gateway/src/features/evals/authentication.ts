import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Principal, Scope } from '@ent/common/auth/scopes';
import { forbidden, serviceUnavailable } from '@ent/common/errors/app-error';
import type { KnownKey, Principals } from '../../plugins/principals.ts';
import { authenticateSession, sessionTokenOf } from '../sessions/cookie-authentication.ts';
import type { Sessions } from '../sessions/sessions.ts';

declare module 'fastify' {
  interface FastifyRequest {
    knownKey: KnownKey | null;
  }
  interface FastifyContextConfig {
    /** The scope the route's key must hold (its `authentication` hook checks it; the config says so to readers). */
    scope?: Scope;
  }
}

export interface RequestAuthentication {
  /**
   * An onRequest hook that resolves the key `keyOf` reads (401) and checks `scope` ("check" unless given; 403),
   * keeping the key on the request. A callback hook: a key already in memory costs no promise. A request with no
   * key at all (nor an Authorization header) may use the console's session cookie instead.
   */
  authentication(keyOf: (request: FastifyRequest) => string | undefined, scope?: Scope): onRequestHookHandler;
  /**
   * For a route that makes no gate call: the request's key as of the organization's auth version read from Redis
   * (401 once revoked, as an eval's gate call would find), and `scope` checked again (403).
   */
  confirmKey(request: FastifyRequest, authVersion: number, nowMs: number, scope: Scope): Promise<void>;
}

/** The `X-API-Key` header (Node joins a repeated one with commas, which the key check refuses as malformed). */

const refuseScope = (principal: Principal, scope: Scope = 'check') => {
  if (!principal.scopes.has(scope)) {
    throw forbidden(`This API key lacks the "${scope}" scope (or its member's role does not allow it).`);
  }
};

/**
 * The key as re-confirmed after the request began: it must still hold `scope` (403) and still belong to the
 * organization the request was begun for (else 503: the answer already read would be another's).
 */
export function refuseChanged(current: KnownKey, organizationId: string, scope: Scope = 'check'): void {
  refuseScope(current.principal!, scope);
  if (current.principal!.organizationId !== organizationId) throw serviceUnavailable('Retry the request.');
}

/** Who a request is (an API key, or the console's session cookie) and what it may do, for the eval routes. */
export function requestAuthentication(principals: Principals, sessions: Sessions): RequestAuthentication {
  /** Undefined when decided at once (a key in memory), else the lookup under way. */
  function authenticate(
    request: FastifyRequest,
    key: string | undefined,
    scope: Scope,
  ): Promise<void> | undefined {
    const known = key === undefined ? undefined : principals.known(key);
    if (known) {
      refuseScope(known.principal!, scope);
      request.knownKey = known;
      return undefined;
    }
    return principals.authenticate(key, request).then((looked) => {
      refuseScope(looked.principal!, scope);
      request.knownKey = looked;
    });
  }

  /** No key: the console's session cookie (401 without one), then `scope`. */
  function authenticateWithoutKey(request: FastifyRequest, scope: Scope): Promise<void> | undefined {
    const token = sessionTokenOf(request);
    if (token === undefined) return authenticate(request, undefined, scope);
    return authenticateSession(sessions, request, token).then((known) => {
      refuseScope(known.principal!, scope);
      request.knownKey = known;
    });
  }

  const authentication: RequestAuthentication['authentication'] = (keyOf, scope = 'check') =>
    function authenticateEval(request, _reply, done) {
      let pending: Promise<void> | undefined;
      try {
        const key = keyOf(request);
        pending =
          key === undefined ? authenticateWithoutKey(request, scope) : authenticate(request, key, scope);
      } catch (error) {
        return done(error as Error);
      }
      if (pending === undefined) done();
      else pending.then(() => done(), done);
    };

  async function confirmKey(
    request: FastifyRequest,
    authVersion: number,
    nowMs: number,
    scope: Scope,
  ): Promise<void> {
    const known = request.knownKey!;
    refuseChanged(
      await principals.confirm(known, authVersion, nowMs),
      known.principal!.organizationId,
      scope,
    );
  }

  return { authentication, confirmKey };
}
