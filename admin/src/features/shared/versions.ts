import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';

/** Call inside the transaction of every catalog write (features, plans, grants). */
export async function bumpCatalogVersion(trx: Transaction<Database>, organizationId: string): Promise<void> {
  await trx
    .updateTable('organizations')
    .set({ catalog_version: sql`catalog_version + 1` })
    .where('id', '=', organizationId)
    .execute();
}

/** Call inside the transaction of every write to a subscriber, its subscriptions or its overrides. */
export async function bumpSubscriberVersion(
  trx: Transaction<Database>,
  organizationId: string,
  subscriberId: string,
): Promise<void> {
  await trx
    .updateTable('subscribers')
    .set({ version: sql`version + 1`, updated_at: sql`now()` })
    .where('organization_id', '=', organizationId)
    .where('subscriber_id', '=', subscriberId)
    .execute();
}

/** Call inside the transaction of every key, member or role change. */
export async function bumpAuthVersion(trx: Transaction<Database>, organizationId: string): Promise<void> {
  await trx
    .updateTable('organizations')
    .set({ auth_version: sql`auth_version + 1` })
    .where('id', '=', organizationId)
    .execute();
}
