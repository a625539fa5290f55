import { sql, type Kysely } from 'kysely';
import { effectiveScopes, isScope, type ApiKeyPrincipal } from '@ent/common/auth/scopes';
import type { Database } from '@ent/common/db/database';
import { AppError } from '@ent/common/errors/app-error';
import { newId } from '@ent/common/ids';
import { newAuditEntryId, recordableDetails } from '../audit/entry.ts';
import { appendOutcome, insertPendingEntry } from '../audit/service.ts';
import { WriteOutcome } from '../shared/write/outcome.ts';

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
  /** The status the route answers when the write succeeds. */
  status: number;
}

/**
 * Audited as the route is: a pending entry first (as `principal`, user agent `entctl`), then `work` with the write's
 * outcome, then the entry's outcome with the write's details, or the error's status and no details. The outcome is
 * for details only: a write that moves a version goes through admin's write pipeline instead (it publishes).
 */
export async function auditedOperatorWrite<T>(
  db: Kysely<Database>,
  principal: ApiKeyPrincipal,
  request: OperatorRequest,
  now: Date,
  work: (outcome: WriteOutcome) => Promise<T>,
): Promise<T> {
  const { id: entryId, occurredAt } = newAuditEntryId(now.getTime());
  const organizationId = principal.organizationId;
  await insertPendingEntry(db, {
    id: entryId,
    organizationId,
    occurredAt,
    requestId: newId('req'),
    actor: { memberId: principal.memberId, authType: principal.authType, keyPrefix: principal.keyPrefix },
    service: request.service,
    method: request.method,
    route: request.route,
    params: request.params,
    // The operator acts on the service's own hosts, not over the network.
    ip: '127.0.0.1',
    userAgent: 'entctl',
  });
  const outcome = new WriteOutcome();
  try {
    const result = await work(outcome);
    await appendOutcome(db, {
      eventId: entryId,
      organizationId,
      outcome: 'responded',
      status: request.status,
      details: recordableDetails(outcome.details),
    });
    return result;
  } catch (error) {
    const status = error instanceof AppError ? error.status : 500;
    await appendOutcome(db, {
      eventId: entryId,
      organizationId,
      outcome: 'responded',
      status,
      details: null,
    });
    throw error;
  }
}
