import type { Kysely, Transaction } from 'kysely';
import { transact } from '@ent/common/outbox/record';
import type { Database, Organization } from '@ent/common/db/database';
import type { UpdateOrganizationBody } from '@ent/common/schemas/organization';

type Db = Kysely<Database> | Transaction<Database>;

export function findOrganization(db: Db, organizationId: string): Promise<Organization | undefined> {
  return db.selectFrom('organizations').selectAll().where('id', '=', organizationId).executeTakeFirst();
}

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
 * `work` in a transaction that takes the organization's row lock before any other row. Most key, member and
 * catalog writes end by bumping a version on that row; taking it first means two of them never hold each other's
 * rows in opposite orders (a deadlock, which Postgres breaks only after a second), and a check made inside `work`
 * sees every such write committed before it (a member suspended, a service account removed).
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
