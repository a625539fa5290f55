import type { Kysely, Transaction } from 'kysely';
import type { Principal } from '@ent/common/auth/scopes';
import type { Database } from '@ent/common/db/database';
import { forbidden, unauthenticated } from '@ent/common/errors/app-error';
import { withOrganizationLocked } from '../organization/store.ts';
import { findMember } from './store.ts';

/**
 * `work` under the organization's lock, once the caller's member is confirmed as authentication found it: still
 * active (401) and still of the same role (403). A request authenticated just before its caller was suspended or
 * demoted would otherwise grant what the caller no longer holds (DESIGN.md §2.10): a black-box audit minted a
 * full-access admin key with a request queued behind the admin's own suspension. Every suspension and role change
 * takes the same lock, so whichever commits first is what the other sees.
 */
export function withCallerConfirmed<T>(
  db: Kysely<Database>,
  caller: Principal,
  work: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  return withOrganizationLocked(db, caller.organizationId, async (trx) => {
    const member = await findMember(trx, caller.organizationId, caller.memberId);
    if (member?.status !== 'active')
      throw unauthenticated('The member making this request is no longer active.');
    if (member.role !== caller.role) {
      throw forbidden('The role of the member making this request changed while it ran; send it again.');
    }
    return work(trx);
  });
}
