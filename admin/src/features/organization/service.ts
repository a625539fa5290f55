import type { Kysely } from 'kysely';
import type { Database, Organization } from '@ent/common/db/database';
import { conflict, notFound } from '@ent/common/errors/app-error';
import type { UpdateOrganizationBody } from '@ent/contract/organization';
import { changedFields } from '../shared/changes.ts';
import { lockOrganization } from '../shared/write/locks.ts';
import type { WriteOutcome } from '../shared/write/outcome.ts';
import { findOrganization, updateOrganizationRow } from './store.ts';
import { transact } from '@ent/common/outbox/record';

const isUniqueViolation = (error: unknown): boolean => (error as { code?: string }).code === '23505';

export async function getOrganization(db: Kysely<Database>, organizationId: string): Promise<Organization> {
  const organization = await findOrganization(db, organizationId);
  if (!organization) throw notFound('No such organization.');
  return organization;
}

/** Name and slug (in no snapshot: nothing to publish); the outcome's details name what changed. */
export async function updateOrganization(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  input: UpdateOrganizationBody,
): Promise<Organization> {
  return transact(db, async (trx) => {
    const before = await lockOrganization(trx, organizationId, { keyChange: input.slug !== undefined });
    if (!before) throw notFound('No such organization.');
    const details = changedFields(before, input, ['name', 'slug']);
    if (!details) return before;
    try {
      const organization = await updateOrganizationRow(trx, organizationId, input);
      outcome.details = details;
      return organization;
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw conflict(`The slug "${input.slug}" is already taken.`, { field: 'slug', value: input.slug });
      }
      throw error;
    }
  });
}
