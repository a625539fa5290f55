import type { Kysely, Transaction } from 'kysely';
import type { Database, Subscriber } from '@ent/common/db/database';

type Db = Kysely<Database> | Transaction<Database>;

export function findSubscriber(
  db: Db,
  organizationId: string,
  subscriberId: string,
): Promise<Subscriber | undefined> {
  return db
    .selectFrom('subscribers')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('subscriber_id', '=', subscriberId)
    .executeTakeFirst();
}

/**
 * Locks the subscriber row for the rest of the transaction: every write to a subscriber, its subscriptions
 * or its overrides takes this lock first, so checks such as "no other active subscription to this plan"
 * cannot race.
 */
export function lockSubscriber(
  trx: Transaction<Database>,
  organizationId: string,
  subscriberId: string,
): Promise<Subscriber | undefined> {
  return trx
    .selectFrom('subscribers')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('subscriber_id', '=', subscriberId)
    .forUpdate()
    .executeTakeFirst();
}

export interface SubscriberListFilter {
  limit: number;
  startingAfter?: string;
}

/** Ordered by subscriber_id; fetches one extra row to tell whether another page follows. */
export function listSubscribers(
  db: Db,
  organizationId: string,
  filter: SubscriberListFilter,
): Promise<Subscriber[]> {
  let query = db.selectFrom('subscribers').selectAll().where('organization_id', '=', organizationId);
  if (filter.startingAfter) query = query.where('subscriber_id', '>', filter.startingAfter);
  return query
    .orderBy('subscriber_id')
    .limit(filter.limit + 1)
    .execute();
}

/** True when created; false when the id is taken. */
export async function insertSubscriber(
  trx: Transaction<Database>,
  organizationId: string,
  input: { subscriber_id: string; name?: string | null },
): Promise<boolean> {
  const created = await trx
    .insertInto('subscribers')
    .values({ organization_id: organizationId, subscriber_id: input.subscriber_id, name: input.name ?? null })
    .onConflict((oc) => oc.columns(['organization_id', 'subscriber_id']).doNothing())
    .returning('subscriber_id')
    .executeTakeFirst();
  return created !== undefined;
}

export async function updateSubscriberName(
  trx: Transaction<Database>,
  organizationId: string,
  subscriberId: string,
  name: string | null | undefined,
): Promise<void> {
  await trx
    .updateTable('subscribers')
    .set({ name })
    .where('organization_id', '=', organizationId)
    .where('subscriber_id', '=', subscriberId)
    .execute();
}
