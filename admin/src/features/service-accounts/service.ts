import type { Kysely } from 'kysely';
import type { Principal, Role } from '@ent/common/auth/scopes';
import type { Database } from '@ent/common/db/database';
import { notFound } from '@ent/common/errors/app-error';
import type {
  CreateServiceAccountBody,
  ServiceAccountBody,
  UpdateServiceAccountBody,
} from '@ent/contract/service-accounts';
import { assertMayManageRole, removedMemberUnchangeable } from '../shared/rights.ts';
import { changedFields } from '../shared/changes.ts';
import { bumpAuthVersion } from '../shared/versions.ts';
import {
  findServiceAccount,
  insertServiceAccount,
  listServiceAccounts as listServiceAccountRows,
  renameServiceAccount,
  type ServiceAccountRow,
} from './store.ts';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';
import { withCallerConfirmed } from '../shared/write/locks.ts';
import type { WriteOutcome } from '../shared/write/outcome.ts';
import { transact } from '@ent/common/outbox/record';

export const toServiceAccountBody = (account: ServiceAccountRow): ServiceAccountBody => ({
  service_account_id: account.id,
  member_id: account.member_id,
  name: account.name,
  role: account.role as ServiceAccountBody['role'],
  status: account.status,
  created_at: account.created_at.toISOString(),
  updated_at: account.updated_at.toISOString(),
});

const serviceAccountNotFound = (id: string) =>
  notFound(`No service account with id "${id}".`, { field: 'service_account_id', value: id });

export async function getServiceAccount(
  db: Kysely<Database>,
  organizationId: string,
  id: string,
): Promise<ServiceAccountRow> {
  const account = await findServiceAccount(db, organizationId, id);
  if (!account) throw serviceAccountNotFound(id);
  return account;
}

/** A service account and the member it is, in one transaction. */
export async function createServiceAccount(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  principal: Principal,
  input: CreateServiceAccountBody,
): Promise<ServiceAccountRow> {
  assertMayManageRole(principal, input.role);
  const organizationId = principal.organizationId;
  return withCallerConfirmed(db, principal, async (trx) => {
    const id = await insertServiceAccount(trx, organizationId, input);
    await bumpAuthVersion(trx, outcome, organizationId);
    const created = (await findServiceAccount(trx, organizationId, id))!;
    outcome.details = {
      service_account_id: created.id,
      member_id: created.member_id,
      name: created.name,
      role: created.role,
    };
    return created;
  });
}

/** A rename (the name is not in any snapshot: nothing to publish); the outcome's details name what changed. */
export async function updateServiceAccount(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  principal: Principal,
  id: string,
  input: UpdateServiceAccountBody,
): Promise<ServiceAccountRow> {
  const organizationId = principal.organizationId;
  return transact(db, async (trx) => {
    const before = await findServiceAccount(trx, organizationId, id);
    if (!before) throw serviceAccountNotFound(id);
    assertMayManageRole(principal, before.role as Role);
    const details = changedFields(before, input, ['name']);
    if (!details || input.name === undefined) return before;
    if (before.status === 'removed') throw removedMemberUnchangeable();
    await renameServiceAccount(trx, before, input.name);
    outcome.details = details;
    return (await findServiceAccount(trx, organizationId, id))!;
  });
}

/** The organization's service accounts, newest first, one page. */
export function listServiceAccounts(
  db: Kysely<Database>,
  organizationId: string,
  request: PageRequest<{ limit: number; startingAfter?: string | undefined }>,
): Promise<Page<ServiceAccountRow>> {
  return paginate(
    request,
    {
      find: (id) => findServiceAccount(db, organizationId, id),
      what: 'a service account of this organization',
    },
    (filter) => listServiceAccountRows(db, organizationId, filter),
  );
}
