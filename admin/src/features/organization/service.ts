import type { Kysely } from 'kysely';
import type { Database, Organization } from '@ent/common/db/database';
import { conflict, notFound } from '@ent/common/errors/app-error';
import type { UpdateOrganizationBody } from '@ent/common/schemas/organization';
import { changedFields, type Change } from '../shared/changes.ts';

const isUniqueViolation = (error: unknown): boolean => (error as { code?: string }).code === '23505';

export async function getOrganization(db: Kysely<Database>, organizationId: string): Promise<Organization> {
  const organization = await db
    .selectFrom('organizations')
    .selectAll()
    .where('id', '=', organizationId)
    .executeTakeFirst();
  if (!organization) throw notFound('No such organization.');
  return organization;
}

export interface OrganizationUpdateResult {
  organization: Organization;
  changes: Record<string, Change> | null;
}

export async function updateOrganization(
  db: Kysely<Database>,
  organizationId: string,
  input: UpdateOrganizationBody,
): Promise<OrganizationUpdateResult> {
  return db.transaction().execute(async (trx) => {
    const before = await trx
      .selectFrom('organizations')
      .selectAll()
      .where('id', '=', organizationId)
      .forUpdate()
      .executeTakeFirst();
    if (!before) throw notFound('No such organization.');
    const changes = changedFields(before, input, ['name', 'slug']);
    if (!changes) return { organization: before, changes };
    try {
      const organization = await trx
        .updateTable('organizations')
        .set({ ...input, updated_at: new Date() })
        .where('id', '=', organizationId)
        .returningAll()
        .executeTakeFirstOrThrow();
      return { organization, changes };
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw conflict(`The slug "${input.slug}" is already taken.`, { field: 'slug', value: input.slug });
      }
      throw error;
    }
  });
}
