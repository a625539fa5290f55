import { sql, type Kysely } from 'kysely';
import { effectiveScopes, isScope, type ApiKeyPrincipal } from '@ent/common/auth/scopes';
import type { Database } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';
import { auditEntryIds } from '../audit/entry.ts';
import type { auditedWrite } from '../audit/service.ts';

type AuditEntry = Parameters<typeof auditedWrite>[1];

class OperatorWriteError extends Error {}

export interface OrganizationAdmin {
  slug: string;
  principal: ApiKeyPrincipal;
}

/**
 * The organization's `admin` service account with its oldest live full-access key, as a principal: who an
 * operator's write (`entctl`) acts as, since the operator has no member of their own in the organization.
 */
export async function organizationAdmin(
  db: Kysely<Database>,
  organizationId: string,
): Promise<OrganizationAdmin> {
  const organization = await db
    .selectFrom('organizations')
    .select(['id', 'slug'])
    .where('id', '=', organizationId)
    .executeTakeFirst();
  if (!organization) throw new OperatorWriteError(`no organization with id "${organizationId}"`);
  const account = await db
    .selectFrom('service_accounts as sa')
    .innerJoin('members as m', 'm.id', 'sa.member_id')
    .innerJoin('api_keys as k', 'k.service_account_id', 'sa.id')
    .select([
      'sa.id as serviceAccountId',
      'm.id as memberId',
      'k.id as keyId',
      'k.key_prefix as keyPrefix',
      'k.scopes as keyScopes',
    ])
    .where('sa.organization_id', '=', organizationId)
    .where('m.role', '=', 'admin')
    .where('m.status', '=', 'active')
    .where('k.revoked_at', 'is', null)
    .where(sql<boolean>`cardinality(k.scopes) = 0`)
    .orderBy('k.created_at')
    .orderBy('k.id')
    .executeTakeFirst();
  if (!account) {
    throw new OperatorWriteError(
      `organization ${organizationId} has no active admin service account with a live full-access key to act as`,
    );
  }
  const keyScopes = account.keyScopes.filter(isScope);
  return {
    slug: organization.slug,
    principal: {
      organizationId,
      memberId: account.memberId,
      keyPrefix: account.keyPrefix,
      role: 'admin',
      keyScopes,
      scopes: effectiveScopes(keyScopes, 'admin'),
      authType: 'member_apikey',
      serviceAccountId: account.serviceAccountId,
      keyId: account.keyId,
    },
  };
}

/** The request an operator's write stands for, as its audit entry records it. */
export interface OperatorRequest {
  service: 'api' | 'identity';
  method: 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The route template, e.g. `/org/subscribers/{subscriber_id}/usage/{feature}`. */
  route: string;
  params: Record<string, string>;
}

/** entctl's entry ids: one operator command per process. */
const newAuditEntryId = auditEntryIds();

/** The audit entry of an operator's write (`auditedWrite`), as `principal`, with `entctl` as the user agent. */
export function operatorAuditEntry(
  principal: ApiKeyPrincipal,
  request: OperatorRequest,
  now: Date,
): AuditEntry {
  const { id, occurredAt } = newAuditEntryId(now.getTime());
  return {
    id,
    organizationId: principal.organizationId,
    occurredAt,
    requestId: newId('req'),
    actor: { memberId: principal.memberId, authType: principal.authType, keyPrefix: principal.keyPrefix },
    ...request,
    // The operator acts on the service's own hosts, not over the network.
    ip: '127.0.0.1',
    userAgent: 'entctl',
  };
}
