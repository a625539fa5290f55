import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { recordOutbox } from '@ent/common/outbox/record';
import type { WriteOutcome } from './write/outcome.ts';

/**
 * Each bump records its outbox entry in the same transaction, so a committed change always reaches Redis: the
 * write-through after the commit is the fast path, the outbox relay the guarantee. Each also names its target on
 * the write's outcome, which the write pipeline publishes before the 2xx: a version never moves without its publish.
 */

/** Call inside the transaction of every catalog write (features, plans, grants). */
export async function bumpCatalogVersion(
  trx: Transaction<Database>,
  outcome: WriteOutcome,
  organizationId: string,
): Promise<void> {
  const { catalog_version: version } = await trx
    .updateTable('organizations')
    .set({ catalog_version: sql`catalog_version + 1` })
    .where('id', '=', organizationId)
    .returning('catalog_version')
    .executeTakeFirstOrThrow();
  await recordOutbox(trx, { organizationId, kind: 'catalog', version });
  outcome.catalogChanged = true;
}

/** Call inside the transaction of every write to a subscriber, its subscriptions or its overrides. */
export async function bumpSubscriberVersion(
  trx: Transaction<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  subscriberId: string,
): Promise<void> {
  const { version } = await trx
    .updateTable('subscribers')
    .set({ version: sql`version + 1`, updated_at: sql`now()` })
    .where('organization_id', '=', organizationId)
    .where('subscriber_id', '=', subscriberId)
    .returning('version')
    .executeTakeFirstOrThrow();
  await recordOutbox(trx, { organizationId, kind: 'subscriber', subject: subscriberId, version });
  outcome.subscribersChanged.add(subscriberId);
}

/** Call inside the transaction of every key, member or role change. */
export async function bumpAuthVersion(
  trx: Transaction<Database>,
  outcome: WriteOutcome,
  organizationId: string,
): Promise<void> {
  const { auth_version: version } = await trx
    .updateTable('organizations')
    .set({ auth_version: sql`auth_version + 1` })
    .where('id', '=', organizationId)
    .returning('auth_version')
    .executeTakeFirstOrThrow();
  await recordOutbox(trx, { organizationId, kind: 'auth', version });
  outcome.authChanged = true;
}
