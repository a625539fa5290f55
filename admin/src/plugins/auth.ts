import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hashApiKey, isWellFormedApiKey } from '@ent/common/auth/api-key';
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

export async function findPrincipal(app: FastifyInstance, plaintext: string): Promise<Principal | null> {
  const row = await app.db
    .selectFrom('api_keys as k')
    .innerJoin('service_accounts as sa', 'sa.id', 'k.service_account_id')
    .innerJoin('members as m', 'm.id', 'sa.member_id')
    .select(['k.id', 'k.organization_id', 'k.key_prefix', 'k.scopes', 'sa.id as service_account_id', 'm.id as member_id', 'm.role'])
    .where('k.key_hash', '=', hashApiKey(plaintext))
    .where('k.revoked_at', 'is', null)
    .where('m.status', '=', 'active')
    .executeTakeFirst();
  if (!row || !isRole(row.role)) return null;
  const keyScopes = row.scopes.filter(isScope);
  return {
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
 * revoked), then the route's scope and role are checked (403).
 */
export const authentication = fp(
  async function authentication(app: FastifyInstance) {
    app.decorateRequest('principal', null);
    app.addHook('onRequest', async (request, reply) => {
      if (!request.routeOptions.config.scope) return;
      const header = request.headers['x-api-key'];
      const plaintext = Array.isArray(header) ? header[0] : header;
      if (!plaintext || !isWellFormedApiKey(plaintext)) return sendError(request, reply, unauthenticated());
      let principal: Principal | null;
      try {
        principal = await findPrincipal(app, plaintext);
      } catch (error) {
        request.log.error({ err: error }, 'key lookup failed');
        return sendError(request, reply, serviceUnavailable('Credentials cannot be checked right now; retry with backoff.'));
      }
      if (!principal) return sendError(request, reply, unauthenticated('The API key is invalid or has been revoked.'));
      request.principal = principal;
      const reason = refusal(principal, request);
      if (reason) return sendError(request, reply, forbidden(reason));
    });
  },
  { name: 'authentication', dependencies: ['infrastructure'] },
);
