import { sql, type Kysely, type Transaction } from 'kysely';
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
  /** Id prefix or name substring, ignoring case. */
  search?: string;
}

/** The search text as a LIKE pattern's literal part: `\`, `%` and `_` match themselves (`\` is LIKE's escape). */
const escapeLike = (text: string): string => text.replace(/[\\%_]/g, (char) => `\\${char}`);

/** Ordered by subscriber_id; fetches one extra row to tell whether another page follows. */
export function listSubscribers(
  db: Db,
  organizationId: string,
  filter: SubscriberListFilter,
): Promise<Subscriber[]> {
  let query = db.selectFrom('subscribers').selectAll().where('organization_id', '=', organizationId);
  if (filter.startingAfter) query = query.where('subscriber_id', '>', filter.startingAfter);
  if (filter.search !== undefined) {
    const literal = escapeLike(filter.search);
    // Written as the indexes are (2026-11-24T1110): lower(subscriber_id) text_pattern_ops serves the prefix,
    // the trigram index on lower(name) the substring; Postgres ORs the two bitmaps. Both sides lower()ed in
    // SQL, so the case folding is Postgres's on each side.
    query = query.where((eb) =>
      eb.or([
        eb(sql`lower(subscriber_id)`, 'like', sql<string>`lower(${`${literal}%`})`),
        eb(sql`lower(name)`, 'like', sql<string>`lower(${`%${literal}%`})`),
      ]),
    );
  }
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
