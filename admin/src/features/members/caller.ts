import type { Kysely, Transaction } from 'kysely';
import { ROLE_RANK, type Principal, type Role } from '@ent/common/auth/scopes';
import type { Database } from '@ent/common/db/database';
import { forbidden, unauthenticated } from '@ent/common/errors/app-error';
import { withOrganizationLocked } from '../organization/store.ts';
import { findMember } from './store.ts';

/** Whether the key or console session the request came with is still live, read inside `trx`. */
async function credentialIsLive(trx: Transaction<Database>, caller: Principal): Promise<boolean> {
  const live =
    caller.authType === 'member_apikey'
      ? trx
          .selectFrom('api_keys')
          .select('id')
          .where('id', '=', caller.keyId)
          .where('revoked_at', 'is', null)
          .forShare()
      : // Its expiry was checked on the app's clock when the request began; a revocation is what can race it.
        trx
          .selectFrom('console_sessions')
          .select('id')
          .where('id', '=', caller.sessionId)
          .where('revoked_at', 'is', null)
          .forShare();
  return (await live.executeTakeFirst()) !== undefined;
}

/**
 * `work` under the organization's lock, once the caller is confirmed as authentication found it: its key or
 * session not revoked meanwhile and its member still active (else 401), its role not lowered (else 403). A request
 * authenticated just before its caller was revoked, suspended or demoted would otherwise grant what the caller no
 * longer holds (DESIGN.md §2.10): a black-box audit minted a full-access admin key with a request queued behind the
 * admin's own suspension, and a review did the same behind the revocation of the key itself. Suspensions, role
 * changes and key revocations take the same organization lock; a session ended without it (sign-out, a password
 * change) waits for the credential's share lock. Either way, whichever commits first is what the other sees.
 */
export function withCallerConfirmed<T>(
  db: Kysely<Database>,
  caller: Principal,
  work: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  return withOrganizationLocked(db, caller.organizationId, async (trx) => {
    const member = await findMember(trx, caller.organizationId, caller.memberId);
    if (member?.status !== 'active' || !(await credentialIsLive(trx, caller))) {
      throw unauthenticated('The credentials of this request were revoked while it ran.');
    }
    if (ROLE_RANK[member.role as Role] < ROLE_RANK[caller.role]) {
      throw forbidden('The role of the member making this request was lowered while it ran; send it again.');
    }
    return work(trx);
  });
}
