import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { LRUCache } from 'lru-cache';
import { hashApiKey, isWellFormedApiKey } from '@ent/common/auth/api-key';
import { AuthFailureLimiter, authRateLimited } from '@ent/common/auth/failure-limiter';
import {
  effectiveScopes,
  isScope,
  type ApiKeyPrincipal,
  type Principal,
  type Scope,
} from '@ent/common/auth/scopes';
import { AppError, forbidden, serviceUnavailable, unauthenticated } from '@ent/common/errors/app-error';
import { sendError } from '@ent/common/http/error-handler';
import { settledWithin } from '@ent/common/http/probe';
import { KEY_LOOKUP_TIMEOUT_MS } from '@ent/common/http/server-options';
import { crossSiteRefusal } from '@ent/common/http/session-request';
import {
  GATEWAY_FAILURE_LIMIT_HEADER,
  isFailureLimitAddress,
  relayedBy,
  unstatedFailureLimitAddress,
} from '@ent/common/http/local-client';
import { internalCaller } from './internal-access.ts';
import { isLiveKey, keyWithHolder } from '@ent/common/snapshots/build';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyInstance {
    /** Failed credential lookups per client address (unknown keys, ended sessions): 429 once spent. */
    authFailures: AuthFailureLimiter;
    /** The bucket of `authFailures` a request's client is charged to (failureLimitAddressAtAdmin). */
    authFailureAddress(request: FastifyRequest): string;
  }
  interface FastifyContextConfig {
    /** The scope a key needs for this route; absent on routes outside /org. */
    scope?: Scope;
    /** Further scopes the route needs besides `scope` (a read of several families: the export). */
    alsoScopes?: readonly Scope[];
    /** Only members with the admin role, whatever the key's scopes (role and member changes). */
    adminOnly?: boolean;
  }
}

/**
 * The other credential the /org routes take: the console's session cookie. The feature that owns sessions provides
 * it (features/console-sessions/credential.ts) and app.ts hands it over, so this plugin stays below the features.
 */
export interface SessionCredential {
  /** The session token the request carries, or undefined when it carries none. */
  tokenOf(request: FastifyRequest): string | undefined;
  /** The live session's principal and CSRF hash; an AppError (401, 429, 503) when it cannot be had. */
  authenticate(
    app: FastifyInstance,
    request: FastifyRequest,
    token: string,
  ): Promise<{ principal: Principal; csrfHash: string }>;
}

export interface AuthenticationOptions {
  sessions: SessionCredential;
}

/** A key hash never issued stays unknown (256 random bits), so it is remembered this long, not just seconds. */
const UNKNOWN_KEY_MEMORY_MS = 60_000;
/** Bounds of the two key memories (a hash is 64 bytes): unknown keys, and keys that recently authenticated. */
const REMEMBERED_KEYS_MAX = 10_000;

/** The key's principal, or null with whether the key was ever issued (revoked or suspended: issued). */
async function findPrincipal(
  app: FastifyInstance,
  plaintext: string,
): Promise<{ principal: Principal | null; issued: boolean }> {
  const row = await keyWithHolder(app.db).where('k.key_hash', '=', hashApiKey(plaintext)).executeTakeFirst();
  if (!row) return { principal: null, issued: false };
  if (!isLiveKey(row)) return { principal: null, issued: true };
  const keyScopes = row.scopes.filter(isScope);
  const principal: ApiKeyPrincipal = {
    organizationId: row.organization_id,
    memberId: row.member_id,
    serviceAccountId: row.service_account_id,
    keyId: row.id,
    keyPrefix: row.key_prefix,
    role: row.role,
    keyScopes,
    scopes: effectiveScopes(keyScopes, row.role),
    authType: 'member_apikey',
  };
  return { principal, issued: true };
}

/**
 * The failure-limit bucket of a request's client at admin. Through a gateway, the gateway's own judgement of its
 * client (GATEWAY_FAILURE_LIMIT_HEADER): its `X-Forwarded-For` names a loopback address both for a local client and
 * for the clients of a local proxy it does not trust, and only the first may be exempt. The statement counts only from
 * a caller of admin's /internal routes: with INTERNAL_TOKEN, one presenting it (the gateway sends it on every forward);
 * without, a peer on this machine, whose statement must then also agree with the address it forwards (its own
 * `failureLimitAddress` always does), so a client relayed by some other local proxy passing headers through cannot
 * claim more than its `X-Forwarded-For` already could. Without a statement: unstatedFailureLimitAddress.
 */
function failureLimitAddressAtAdmin(
  request: FastifyRequest,
  fromInternalCaller: (request: FastifyRequest) => boolean,
  tokenRequired: boolean,
): string {
  const stated = request.headers[GATEWAY_FAILURE_LIMIT_HEADER];
  if (typeof stated === 'string' && isFailureLimitAddress(stated) && fromInternalCaller(request)) {
    if (tokenRequired || stated === request.ip || stated === relayedBy(request.ip)) return stated;
  }
  return unstatedFailureLimitAddress(request);
}

/** Why the principal may not call this route, or null when it may. */
function refusal(principal: Principal, request: FastifyRequest): string | null {
  const { scope: firstScope, alsoScopes = [], adminOnly } = request.routeOptions.config;
  if (adminOnly && principal.role !== 'admin') return 'Only members with the admin role may do this.';
  const scope = [firstScope, ...alsoScopes].find((needed) => needed && !principal.scopes.has(needed));
  if (scope) {
    return principal.authType === 'member_session'
      ? `The ${principal.role} role does not allow this (it needs "${scope}").`
      : `This API key lacks the "${scope}" scope (or its member's role does not allow it).`;
  }
  return null;
}

/**
 * A request with no X-API-Key but the console's session cookie: the live session (401 otherwise), then, for a
 * write, its origin and CSRF token (403 before anything runs, and before a principal exists, so no audit entry
 * claims a forged request as the member's), then the route's rights, the member's role (403, audited rejected).
 */
async function sessionAuthentication(
  app: FastifyInstance,
  sessions: SessionCredential,
  request: FastifyRequest,
  reply: FastifyReply,
  token: string,
): Promise<FastifyReply | undefined> {
  let principal: Principal;
  try {
    const session = await sessions.authenticate(app, request, token);
    const crossSite = crossSiteRefusal(request, session.csrfHash);
    if (crossSite) return sendError(request, reply, forbidden(crossSite));
    principal = session.principal;
  } catch (error) {
    if (error instanceof AppError) return sendError(request, reply, error);
    throw error;
  }
  request.principal = principal;
  const reason = refusal(principal, request);
  if (reason) return sendError(request, reply, forbidden(reason));
  return undefined;
}

/**
 * Every /org route: the X-API-Key selects the organization (401 when missing, malformed, unknown or
 * revoked), then the route's scope and role are checked (403). A key never issued is remembered, and a client
 * address out of failed lookups gets 429 before any query, unless its key authenticated recently: a flood of
 * random keys costs no Postgres work per request. Without X-API-Key, the console's session cookie is accepted
 * instead (sessionAuthentication); a request with a key never looks at cookies.
 */
export const authentication = fp<AuthenticationOptions>(
  async function authentication(app: FastifyInstance, { sessions }) {
    app.decorateRequest('principal', null);
    const unknownKeys = new LRUCache<string, number>({ max: REMEMBERED_KEYS_MAX });
    // Still looked up every time (a revocation wins at once); only exempt from the failure limit.
    const recentlyValid = new LRUCache<string, true>({ max: REMEMBERED_KEYS_MAX });
    const failures = new AuthFailureLimiter(app.config, () => app.clock.now());
    app.decorate('authFailures', failures);
    const fromInternalCaller = internalCaller(app.config);
    const tokenRequired = app.config.internalToken !== '';
    const failureAddress = (request: FastifyRequest) =>
      failureLimitAddressAtAdmin(request, fromInternalCaller, tokenRequired);
    app.decorate('authFailureAddress', failureAddress);
    app.addHook('onRequest', async (request, reply) => {
      if (!request.routeOptions.config.scope) return;
      // An organization's data, and once each a key, invite link or webhook secret: never kept by a cache between.
      reply.header('cache-control', 'no-store');
      const header = request.headers['x-api-key'];
      const plaintext = Array.isArray(header) ? header[0] : header;
      if (plaintext === undefined) {
        const sessionToken = sessions.tokenOf(request);
        if (sessionToken !== undefined)
          return sessionAuthentication(app, sessions, request, reply, sessionToken);
      }
      if (!plaintext || !isWellFormedApiKey(plaintext)) return sendError(request, reply, unauthenticated());
      const keyHash = hashApiKey(plaintext);
      const forgetAt = unknownKeys.get(keyHash);
      if (forgetAt !== undefined && app.clock.now() < forgetAt) {
        return sendError(request, reply, unauthenticated('The API key is invalid or has been revoked.'));
      }
      const limited = !recentlyValid.has(keyHash);
      if (limited) {
        const retryAfter = failures.beforeLookup(failureAddress(request));
        if (retryAfter > 0) return sendError(request, reply, authRateLimited(retryAfter));
      }
      let found: { principal: Principal | null; issued: boolean };
      try {
        found = await settledWithin(findPrincipal(app, plaintext), KEY_LOOKUP_TIMEOUT_MS);
      } catch (error) {
        if (limited) failures.notAFailure(failureAddress(request)); // not the client's failure
        request.log.error({ err: error }, 'key lookup failed');
        return sendError(
          request,
          reply,
          serviceUnavailable('Credentials cannot be checked right now; retry with backoff.'),
        );
      }
      const { principal } = found;
      if (!principal) {
        recentlyValid.delete(keyHash);
        if (!found.issued) unknownKeys.set(keyHash, app.clock.now() + UNKNOWN_KEY_MEMORY_MS);
        return sendError(request, reply, unauthenticated('The API key is invalid or has been revoked.'));
      }
      if (limited) failures.notAFailure(failureAddress(request));
      recentlyValid.set(keyHash, true);
      request.principal = principal;
      const reason = refusal(principal, request);
      if (reason) return sendError(request, reply, forbidden(reason));
    });
  },
  { name: 'authentication', dependencies: ['infrastructure'] },
);
