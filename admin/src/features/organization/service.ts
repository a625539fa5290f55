import type { Kysely } from 'kysely';
import type { Database, Organization } from '@ent/common/db/database';
import { conflict, notFound } from '@ent/common/errors/app-error';
import type { UpdateOrganizationBody } from '@ent/common/schemas/organization';
import { changedFields, type Change } from '../shared/changes.ts';
import { findOrganization, lockOrganization, updateOrganizationRow } from './store.ts';
import { transact } from '@ent/common/outbox/record';

const isUniqueViolation = (error: unknown): boolean => (error as { code?: string }).code === '23505';

export async function getOrganization(db: Kysely<Database>, organizationId: string): Promise<Organization> {
  const organization = await findOrganization(db, organizationId);
  if (!organization) throw notFound('No such organization.');
  return organization;
}

export interface OrganizationUpdateResult {
  organization: Organization;
  /** The audit details of what changed; null: nothing did. */
  details: Record<string, Change> | null;
}

export async function updateOrganization(
  db: Kysely<Database>,
  organizationId: string,
  input: UpdateOrganizationBody,
): Promise<OrganizationUpdateResult> {
  return transact(db, async (trx) => {
    const before = await lockOrganization(trx, organizationId, { keyChange: input.slug !== undefined });
    if (!before) throw notFound('No such organization.');
    const details = changedFields(before, input, ['name', 'slug']);
    if (!details) return { organization: before, details };
    try {
      const organization = await updateOrganizationRow(trx, organizationId, input);
      return { organization, details };
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw conflict(`The slug "${input.slug}" is already taken.`, { field: 'slug', value: input.slug });
      }
      throw error;
    }
  });
}
