import type { Kysely } from 'kysely';
import type { Role } from '@ent/common/auth/scopes';
import type { Database } from '@ent/common/db/database';
import { auditedWrite } from '../audit/service.ts';
import { createInvite, inviteLinkOf, type InviteSettings } from '../invites/service.ts';
import { operatorAuditEntry, organizationAdmin } from './operator-write.ts';

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
  const { slug, principal } = await organizationAdmin(db, input.organizationId);
  const entry = operatorAuditEntry(
    principal,
    { service: 'identity', method: 'POST', route: '/org/invites', params: {} },
    now,
  );
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
    slug,
    role: invite.role as Role,
    email: invite.email,
    url: inviteLinkOf(invite, settings),
    expires_at: invite.expires_at.toISOString(),
  };
}
