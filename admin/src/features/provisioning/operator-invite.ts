import { sql, type Kysely } from 'kysely';
import { effectiveScopes, isScope, type ApiKeyPrincipal, type Role } from '@ent/common/auth/scopes';
import type { Database } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';
import { newAuditEntryId } from '../audit/entry.ts';
import { auditedWrite } from '../audit/service.ts';
import { createInvite, inviteLinkOf, type InviteSettings } from '../invites/service.ts';

export interface OperatorInvite {
  invite_id: string;
  organization_id: string;
  /** What the console's sign-in asks for as the organization. */
  slug: string;
  role: Role;
  email: string | null;
  /** The console's join link (shown once here; an admin can read it again while it is live). */
  url: string;
  expires_at: string;
}

class OperatorInviteError extends Error {}

/** The organization and its `admin` service account with a live full-access key, oldest first. */
async function organizationAdmin(db: Kysely<Database>, organizationId: string) {
  const organization = await db
    .selectFrom('organizations')
    .select(['id', 'slug'])
    .where('id', '=', organizationId)
    .executeTakeFirst();
  if (!organization) throw new OperatorInviteError(`no organization with id "${organizationId}"`);
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
    throw new OperatorInviteError(
      `organization ${organizationId} has no active admin service account with a live full-access key to invite as`,
    );
  }
  return { slug: organization.slug, ...account };
}

/**
 * An invite made by the operator (`entctl org invite`): how a person gets into the console of an organization
 * that `entctl org create` made (it has no person, so nobody could invite one). It is made exactly as
 * `POST /org/invites` makes one, as the organization's `admin` service account through its oldest live
 * full-access key (the caller confirmed under the organization's lock, the role checked as grantable), and
 * audited as that route is: a pending entry first, then its outcome, with `entctl` as the user agent.
 */
export async function createOperatorInvite(
  db: Kysely<Database>,
  settings: InviteSettings,
  input: { organizationId: string; role: Role; email?: string | undefined },
  now: Date,
): Promise<OperatorInvite> {
  const admin = await organizationAdmin(db, input.organizationId);
  const keyScopes = admin.keyScopes.filter(isScope);
  const principal: ApiKeyPrincipal = {
    organizationId: input.organizationId,
    memberId: admin.memberId,
    keyPrefix: admin.keyPrefix,
    role: 'admin',
    keyScopes,
    scopes: effectiveScopes(keyScopes, 'admin'),
    authType: 'member_apikey',
    serviceAccountId: admin.serviceAccountId,
    keyId: admin.keyId,
  };
  const { id: entryId, occurredAt } = newAuditEntryId(now.getTime());
  const entry = {
    id: entryId,
    organizationId: input.organizationId,
    occurredAt,
    requestId: newId('req'),
    actor: { memberId: principal.memberId, authType: principal.authType, keyPrefix: principal.keyPrefix },
    service: 'identity' as const,
    method: 'POST',
    route: '/org/invites',
    params: {},
    // The operator acts on the service's own hosts, not over the network.
    ip: '127.0.0.1',
    userAgent: 'entctl',
  };
  const invite = await auditedWrite(db, entry, 201, (outcome) =>
    createInvite(
      db,
      outcome,
      settings,
      principal,
      { role: input.role, ...(input.email === undefined ? {} : { email: input.email }) },
      now,
    ),
  );
  return {
    invite_id: invite.id,
    organization_id: input.organizationId,
    slug: admin.slug,
    role: invite.role as Role,
    email: invite.email,
    url: inviteLinkOf(invite, settings),
    expires_at: invite.expires_at.toISOString(),
  };
}
