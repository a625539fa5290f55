import type { Kysely, Transaction } from 'kysely';
import { generateApiKey } from '@ent/common/auth/api-key';
import { DEFAULT_KEY_SCOPES, isScope, type Principal, type Role } from '@ent/common/auth/scopes';
import type { Database } from '@ent/common/db/database';
import { conflict, notFound } from '@ent/common/errors/app-error';
import type { ApiKeyBody, CreateApiKeyBody } from '@ent/contract/api-keys';
import { assertMayGrant, assertMayManageKeys } from '../shared/rights.ts';
import { getServiceAccount } from '../service-accounts/service.ts';
import { bumpAuthVersion } from '../shared/versions.ts';
import {
  findApiKey,
  findKeyMintedBy,
  insertApiKey,
  listApiKeys as listApiKeyRows,
  listLiveKeysMintedBy,
  liveKeysMintedBy,
  lockApiKey,
  minterOfKey,
  revokeApiKeyRow,
  revokeKeysMintedBy,
  type ApiKeyRow,
} from './store.ts';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';
import { withCallerConfirmed } from '../shared/write/locks.ts';
import type { WriteOutcome } from '../shared/write/outcome.ts';

export const toApiKeyBody = (key: ApiKeyRow): ApiKeyBody => ({
  key_id: key.id,
  key_prefix: key.key_prefix,
  name: key.name,
  service_account_id: key.service_account_id,
  scopes: key.scopes.filter(isScope),
  created_at: key.created_at.toISOString(),
  revoked_at: key.revoked_at?.toISOString() ?? null,
  minted_by: key.minted_by_member_id
    ? { member_id: key.minted_by_member_id, email: key.minted_by_email }
    : null,
  minted_with_key_id: key.minted_with_key_id,
});

export interface CreatedApiKey {
  key: ApiKeyRow;
  /** Returned once; only the SHA-256 hash is stored. */
  plaintext: string;
}

/**
 * Scopes omitted: `check`; an empty list: full access (whatever the service account's role allows). Either
 * way the caller must hold what it grants: the default `check` too. The key records who could have copied it
 * (decisions.md, "Offboarding: keys a member minted"): the person signed in, or whoever minted the key used.
 */
export async function createApiKey(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  principal: Principal,
  serviceAccountId: string,
  input: CreateApiKeyBody,
): Promise<CreatedApiKey> {
  const organizationId = principal.organizationId;
  const scopes = input.scopes ?? DEFAULT_KEY_SCOPES;
  const generated = generateApiKey();
  const key = await withCallerConfirmed(db, principal, async (trx) => {
    // Read under the lock: a removal committed meanwhile has revoked every key it found, and a promotion would make
    // a full-access key worth more than the caller may grant.
    const account = await getServiceAccount(trx, organizationId, serviceAccountId);
    assertMayGrant(principal, {
      kind: 'key',
      scopes,
      target: { serviceAccountId: account.id, role: account.role as Role },
    });
    if (account.status !== 'active') {
      throw conflict(`The service account is ${account.status}; it cannot get new keys.`, {
        field: 'service_account_id',
        value: serviceAccountId,
      });
    }
    const created = await insertApiKey(trx, {
      organizationId,
      serviceAccountId,
      name: input.name ?? '',
      prefix: generated.prefix,
      hash: generated.hash,
      scopes,
      ...(principal.authType === 'member_session'
        ? { mintedByMemberId: principal.memberId, mintedWithKeyId: null }
        : { mintedByMemberId: await minterOfKey(trx, principal.keyId), mintedWithKeyId: principal.keyId }),
    });
    await bumpAuthVersion(trx, outcome, organizationId);
    outcome.details = { key_id: created.id, key_prefix: created.key_prefix, name: created.name };
    return created;
  });
  return { key, plaintext: generated.plaintext };
}

/** Revokes the key at once (refused on the next request); revoking a revoked key changes nothing. */
export async function revokeApiKey(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  principal: Principal,
  serviceAccountId: string,
  keyId: string,
  now: Date,
): Promise<boolean> {
  const organizationId = principal.organizationId;
  return withCallerConfirmed(db, principal, async (trx) => {
    // Read under the lock, as a role change is made: the caller may manage this account's keys as it is now.
    const account = await getServiceAccount(trx, organizationId, serviceAccountId);
    assertMayManageKeys(principal, { serviceAccountId: account.id, role: account.role as Role });
    const key = await lockApiKey(trx, organizationId, serviceAccountId, keyId);
    if (!key) throw notFound(`No API key with id "${keyId}".`, { field: 'key_id', value: keyId });
    if (key.revoked_at) {
      outcome.unchangedOn({ auth: true });
      return false;
    }
    await revokeApiKeyRow(trx, keyId, now);
    await bumpAuthVersion(trx, outcome, organizationId);
    return true;
  });
}

/** A service account's keys, newest first (revoked ones included), one page; 404 when the account is not there. */
export async function listApiKeys(
  db: Kysely<Database>,
  organizationId: string,
  serviceAccountId: string,
  request: PageRequest<{ limit: number; startingAfter?: string | undefined }>,
): Promise<Page<ApiKeyRow>> {
  const account = await getServiceAccount(db, organizationId, serviceAccountId);
  return paginate(
    request,
    {
      find: (id) => findApiKey(db, organizationId, account.id, id),
      what: 'a key of this service account',
    },
    (filter) => listApiKeyRows(db, organizationId, account.id, filter),
  );
}

/** The live keys a member minted, on any service account, newest first, one page: what removing them would revoke. */
export function listKeysMintedBy(
  db: Kysely<Database>,
  organizationId: string,
  memberId: string,
  request: PageRequest<{ limit: number; startingAfter?: string | undefined }>,
): Promise<Page<ApiKeyRow>> {
  return paginate(
    request,
    {
      find: (id) => findKeyMintedBy(db, organizationId, memberId, id),
      what: 'a key this member minted',
    },
    (filter) => listLiveKeysMintedBy(db, organizationId, memberId, filter),
  );
}

/**
 * The live keys a removed or demoted member minted (id and prefix): revoked when `revoke`, else left live and only
 * listed. Callers hold the organization's lock, which every key creation also takes.
 */
export const settleKeysMintedBy = (
  trx: Transaction<Database>,
  organizationId: string,
  memberId: string,
  revoke: boolean,
  now: Date,
): Promise<{ id: string; key_prefix: string }[]> =>
  revoke
    ? revokeKeysMintedBy(trx, organizationId, memberId, now)
    : liveKeysMintedBy(trx, organizationId, memberId);
