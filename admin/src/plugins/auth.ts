import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { LRUCache } from 'lru-cache';
import { hashApiKey, isWellFormedApiKey } from '@ent/common/auth/api-key';
import { AuthFailureLimiter, authRateLimited } from '@ent/common/auth/failure-limiter';
import { effectiveScopes, isRole, isScope, type Principal, type Scope } from '@ent/common/auth/scopes';
import { forbidden, serviceUnavailable, unauthenticated } from '@ent/common/errors/app-error';
import { sendError } from '@ent/common/http/error-handler';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    /** The scope a key needs for this route; absent on routes outside /org. */
    scope?: Scope;
    /** Only members with the admin role, whatever the key's scopes (role and member changes). */
    adminOnly?: boolean;
  }
}

/** A key hash never issued stays unknown (256 random bits), so it is remembered this long, not just seconds. */
const UNKNOWN_KEY_MEMORY_MS = 60_000;
/** Bounds of the two key memories (a hash is 64 bytes): unknown keys, and keys that recently authenticated. */
const REMEMBERED_KEYS_MAX = 10_000;

/** The key's principal, or null with whether the key was ever issued (revoked or suspended: issued). */
export async function findPrincipal(
  app: FastifyInstance,
  plaintext: string,
): Promise<{ principal: Principal | null; issued: boolean }> {
  const row = await app.db
    .selectFrom('api_keys as k')
    .innerJoin('service_accounts as sa', 'sa.id', 'k.service_account_id')
    .innerJoin('members as m', 'm.id', 'sa.member_id')
    .select(['k.id', 'k.organization_id', 'k.key_prefix', 'k.scopes', 'k.revoked_at', 'sa.id as service_account_id', 'm.id as member_id', 'm.role', 'm.status'])
    .where('k.key_hash', '=', hashApiKey(plaintext))
    .executeTakeFirst();
  if (!row) return { principal: null, issued: false };
  if (row.revoked_at !== null || row.status !== 'active' || !isRole(row.role)) return { principal: null, issued: true };
  const keyScopes = row.scopes.filter(isScope);
  const principal: Principal = {
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

/** Why the principal may not call this route, or null when it may. */
export function refusal(principal: Principal, request: FastifyRequest): string | null {
  const { scope, adminOnly } = request.routeOptions.config;
  if (adminOnly && principal.role !== 'admin') return 'Only members with the admin role may do this.';
  if (scope && !principal.scopes.has(scope)) {
    return `This API key lacks the "${scope}" scope (or its member's role does not allow it).`;
  }
  return null;
}

/**
 * Every /org route: the X-API-Key selects the organization (401 when missing, malformed, unknown or
 * revoked), then the route's scope and role are checked (403). A key never issued is remembered, and a client
 * address out of failed lookups gets 429 before any query, unless its key authenticated recently: a flood of
 * random keys costs no Postgres work per request.
 */
export const authentication = fp(
  async function authentication(app: FastifyInstance) {
    app.decorateRequest('principal', null);
    const unknownKeys = new LRUCache<string, number>({ max: REMEMBERED_KEYS_MAX });
    // Still looked up every time (a revocation wins at once); only exempt from the failure limit.
    const recentlyValid = new LRUCache<string, true>({ max: REMEMBERED_KEYS_MAX });
    const failures = new AuthFailureLimiter(app.config.authFailuresPerMinute, () => app.clock.now());
    app.addHook('onRequest', async (request, reply) => {
      if (!request.routeOptions.config.scope) return;
      const header = request.headers['x-api-key'];
      const plaintext = Array.isArray(header) ? header[0] : header;
      if (!plaintext || !isWellFormedApiKey(plaintext)) return sendError(request, reply, unauthenticated());
      const keyHash = hashApiKey(plaintext);
      const forgetAt = unknownKeys.get(keyHash);
      if (forgetAt !== undefined && app.clock.now() < forgetAt) {
        return sendError(request, reply, unauthenticated('The API key is invalid or has been revoked.'));
      }
      const limited = !recentlyValid.has(keyHash);
      if (limited) {
        const retryAfter = failures.beforeLookup(request.ip);
        if (retryAfter > 0) return sendError(request, reply, authRateLimited(retryAfter));
      }
      let found: { principal: Principal | null; issued: boolean };
      try {
        found = await findPrincipal(app, plaintext);
      } catch (error) {
        if (limited) failures.notAFailure(request.ip); // not the client's failure
        request.log.error({ err: error }, 'key lookup failed');
        return sendError(request, reply, serviceUnavailable('Credentials cannot be checked right now; retry with backoff.'));
      }
      const { principal } = found;
      if (!principal) {
        recentlyValid.delete(keyHash);
        if (!found.issued) unknownKeys.set(keyHash, app.clock.now() + UNKNOWN_KEY_MEMORY_MS);
        return sendError(request, reply, unauthenticated('The API key is invalid or has been revoked.'));
      }
      if (limited) failures.notAFailure(request.ip);
      recentlyValid.set(keyHash, true);
      request.principal = principal;
      const reason = refusal(principal, request);
      if (reason) return sendError(request, reply, forbidden(reason));
    });
  },
  { name: 'authentication', dependencies: ['infrastructure'] },
);
