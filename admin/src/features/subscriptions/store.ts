import { sql, type Kysely, type Transaction } from 'kysely';
import { newId } from '@ent/common/ids';
import type { Database, Plan, Subscription, SubscriptionStatus } from '@ent/common/db/database';

type Db = Kysely<Database> | Transaction<Database>;

/** A subscription with the key of its plan: the API names plans by key only. */
export type SubscriptionWithPlan = Subscription & { plan_key: string };

const withPlanKey = (db: Db, organizationId: string, subscriberId: string) =>
  db
    .selectFrom('subscriptions as s')
    .innerJoin('plans as p', 'p.id', 's.plan_id')
    .selectAll('s')
    .select('p.key as plan_key')
    .where('s.organization_id', '=', organizationId)
    .where('s.subscriber_id', '=', subscriberId);

export function findSubscription(
  db: Db,
  organizationId: string,
  subscriberId: string,
  subscriptionId: string,
): Promise<SubscriptionWithPlan | undefined> {
  return withPlanKey(db, organizationId, subscriberId).where('s.id', '=', subscriptionId).executeTakeFirst();
}

export function findActiveSubscriptions(
  db: Db,
  organizationId: string,
  subscriberId: string,
): Promise<SubscriptionWithPlan[]> {
  return withPlanKey(db, organizationId, subscriberId)
    .where('s.status', '=', 'active')
    .orderBy('s.id')
    .execute();
}

/** Takes a share lock so the plan cannot be archived or deleted until the subscription is committed. */
export function findPlanForSubscribing(
  trx: Transaction<Database>,
  organizationId: string,
  planKey: string,
): Promise<Plan | undefined> {
  return trx
    .selectFrom('plans')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('key', '=', planKey)
    .forShare()
    .executeTakeFirst();
}

export interface SubscriptionListFilter {
  limit: number;
  startingAfter?: string;
  status?: SubscriptionStatus;
}

/** Newest first (ids are time-ordered); fetches one extra row to tell whether another page follows. */
export function listSubscriptions(
  db: Db,
  organizationId: string,
  subscriberId: string,
  filter: SubscriptionListFilter,
): Promise<SubscriptionWithPlan[]> {
  let query = withPlanKey(db, organizationId, subscriberId);
  if (filter.status) query = query.where('s.status', '=', filter.status);
  if (filter.startingAfter) query = query.where('s.id', '<', filter.startingAfter);
  return query
    .orderBy('s.id', 'desc')
    .limit(filter.limit + 1)
    .execute();
}

/** `anchoredAt` omitted: anchored at its creation (the column's default, the same `now()` as `created_at`). */
export async function insertSubscription(
  trx: Transaction<Database>,
  organizationId: string,
  subscriberId: string,
  plan: Plan,
  anchoredAt?: Date,
): Promise<SubscriptionWithPlan> {
  const created = await trx
    .insertInto('subscriptions')
    .values({
      id: newId('sub'),
      organization_id: organizationId,
      subscriber_id: subscriberId,
      plan_id: plan.id,
      ...(anchoredAt === undefined ? {} : { anchored_at: anchoredAt }),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { ...created, plan_key: plan.key };
}

export async function endSubscription(
  trx: Transaction<Database>,
  subscription: SubscriptionWithPlan,
): Promise<SubscriptionWithPlan> {
  const ended = await trx
    .updateTable('subscriptions')
    .set({ status: 'canceled', canceled_at: sql<Date>`now()`, updated_at: sql<Date>`now()` })
    .where('id', '=', subscription.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return { ...ended, plan_key: subscription.plan_key };
}
