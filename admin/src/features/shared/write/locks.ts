import type { Kysely, Transaction } from 'kysely';
import { ROLE_RANK, type Principal, type Role } from '@ent/common/auth/scopes';
import type { Database, Organization } from '@ent/common/db/database';
import { forbidden, unauthenticated } from '@ent/common/errors/app-error';
import { transact } from '@ent/common/outbox/record';

/**
 * The organization's row, locked against other writers of it until the transaction ends. `FOR NO KEY UPDATE`, the
 * lock a version bump takes anyway: rows merely referencing the organization (a pending audit entry, a new
 * subscriber) are still inserted meanwhile, where `FOR UPDATE` held every such insert for the whole transaction.
 * A write that changes a key column (the slug, which is unique) asks for `keyChange`: upgrading the lock later
 * would wait for those inserts while one of them might wait for this writer (a deadlock).
 */
export function lockOrganization(
  trx: Transaction<Database>,
  organizationId: string,
  { keyChange = false }: { keyChange?: boolean } = {},
): Promise<Organization | undefined> {
  const query = trx.selectFrom('organizations').selectAll().where('id', '=', organizationId);
  return (keyChange ? query.forUpdate() : query.forNoKeyUpdate()).executeTakeFirst();
}

/**
 * `work` in a transaction (the one `db` is, when it is one) that takes the organization's row lock before any other
 * row. Most key, member and catalog writes end by bumping a version on that row; taking it first means two of them
 * never hold each other's rows in opposite orders (a deadlock, which Postgres breaks only after a second), and a
 * check made inside `work` sees every such write committed before it (a member suspended, a service account removed).
 */
export function withOrganizationLocked<T>(
  db: Kysely<Database>,
  organizationId: string,
  work: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  return transact(db, async (trx) => {
    await lockOrganization(trx, organizationId);
    return work(trx);
  });
}

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
 * longer holds (DESIGN.md §2.10), such as a full-access key minted by a request queued behind its maker's
 * suspension or behind the revocation of the key it came with. Suspensions, role changes and key revocations take
 * the same organization lock; a session ended without it (sign-out, a password change) waits for the credential's
 * share lock. Either way, whichever commits first is what the other sees.
 */
export function withCallerConfirmed<T>(
  db: Kysely<Database>,
  caller: Principal,
  work: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  return withOrganizationLocked(db, caller.organizationId, async (trx) => {
    const member = await trx
      .selectFrom('members')
      .select(['status', 'role'])
      .where('organization_id', '=', caller.organizationId)
      .where('id', '=', caller.memberId)
      .executeTakeFirst();
    if (member?.status !== 'active' || !(await credentialIsLive(trx, caller))) {
      throw unauthenticated('The credentials of this request were revoked while it ran.');
    }
    if (ROLE_RANK[member.role as Role] < ROLE_RANK[caller.role]) {
      throw forbidden('The role of the member making this request was lowered while it ran; send it again.');
    }
    return work(trx);
  });
}
