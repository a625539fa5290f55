import type { Kysely, Transaction } from 'kysely';
import type { Database, Organization } from '@ent/common/db/database';
import type { UpdateOrganizationBody } from '@ent/contract/organization';

type Db = Kysely<Database> | Transaction<Database>;

export function findOrganization(db: Db, organizationId: string): Promise<Organization | undefined> {
  return db.selectFrom('organizations').selectAll().where('id', '=', organizationId).executeTakeFirst();
}

export function updateOrganizationRow(
  trx: Transaction<Database>,
  organizationId: string,
  input: UpdateOrganizationBody,
): Promise<Organization> {
  return trx
    .updateTable('organizations')
    .set({ ...input, updated_at: new Date() })
    .where('id', '=', organizationId)
    .returningAll()
    .executeTakeFirstOrThrow();
}
