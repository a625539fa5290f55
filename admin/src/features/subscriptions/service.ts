import { transact } from '@ent/common/outbox/record';
import type { Kysely, Transaction } from 'kysely';
import type { Database, Plan } from '@ent/common/db/database';
import { conflict, notFound, validationError } from '@ent/common/errors/app-error';
import type { ChangeSubscriptionBody, SubscriptionBody } from '@ent/contract/subscriptions';
import type { WriteOutcome } from '../shared/write/outcome.ts';
import { subscriberNotFound } from '../subscribers/service.ts';
import { findSubscriber, lockSubscriber } from '../subscribers/service.ts';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';
import { bumpSubscriberVersion } from '../shared/versions.ts';
import {
  endSubscription,
  findActiveSubscriptions,
  insertSubscription,
  findPlanForSubscribing,
  findSubscription,
  listSubscriptions,
  type SubscriptionListFilter,
  type SubscriptionWithPlan,
} from './store.ts';

export const toSubscriptionBody = (subscription: SubscriptionWithPlan): SubscriptionBody => ({
  subscription_id: subscription.id,
  subscriber_id: subscription.subscriber_id,
  plan_id: subscription.plan_key,
  status: subscription.status,
  created_at: subscription.created_at.toISOString(),
  canceled_at: subscription.canceled_at ? subscription.canceled_at.toISOString() : null,
});

/** The subscription a change created, naming the one it canceled. */
export const toChangedSubscriptionBody = ({ created, canceled }: SubscriptionChange) => ({
  ...toSubscriptionBody(created),
  canceled_subscription_id: canceled.id,
});

const subscriptionNotFound = (subscriptionId: string) =>
  notFound(`No subscription with id "${subscriptionId}" for this subscriber.`, {
    field: 'subscription_id',
    value: subscriptionId,
  });

async function lockSubscriberOrThrow(
  trx: Transaction<Database>,
  organizationId: string,
  subscriberId: string,
) {
  const subscriber = await lockSubscriber(trx, organizationId, subscriberId);
  if (!subscriber) throw subscriberNotFound(subscriberId);
  return subscriber;
}

/** An unknown plan is a bad body (422); an archived plan refuses new subscriptions (409). */
async function planOpenForSubscribing(
  trx: Transaction<Database>,
  organizationId: string,
  planKey: string,
): Promise<Plan> {
  const plan = await findPlanForSubscribing(trx, organizationId, planKey);
  if (!plan) throw validationError(`No plan with key "${planKey}".`, { field: 'plan_id', value: planKey });
  if (plan.archived_at) {
    throw conflict(`The plan "${planKey}" is archived and takes no new subscriptions.`, {
      field: 'plan_id',
      value: planKey,
    });
  }
  return plan;
}

function refuseSecondActiveSubscription(active: SubscriptionWithPlan[], plan: Plan): void {
  const existing = active.find((subscription) => subscription.plan_id === plan.id);
  if (existing) {
    throw conflict(`The subscriber already has an active subscription to the plan "${plan.key}".`, {
      field: 'plan_id',
      value: plan.key,
      subscription_id: existing.id,
    });
  }
}

export async function createSubscription(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  subscriberId: string,
  planKey: string,
): Promise<SubscriptionWithPlan> {
  return transact(db, async (trx) => {
    await lockSubscriberOrThrow(trx, organizationId, subscriberId);
    const plan = await planOpenForSubscribing(trx, organizationId, planKey);
    refuseSecondActiveSubscription(await findActiveSubscriptions(trx, organizationId, subscriberId), plan);
    const created = await insertSubscription(trx, organizationId, subscriberId, plan);
    await bumpSubscriberVersion(trx, outcome, organizationId, subscriberId);
    outcome.details = { subscription_id: created.id, plan_id: created.plan_key };
    outcome.raise('subscription.created', toSubscriptionBody(created));
    return created;
  });
}

export interface SubscriptionChange {
  created: SubscriptionWithPlan;
  canceled: SubscriptionWithPlan;
}

/** Ends one active subscription and starts another on `plan_id`, in one transaction. */
export async function changeSubscription(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  subscriberId: string,
  input: ChangeSubscriptionBody,
): Promise<SubscriptionChange> {
  return transact(db, async (trx) => {
    await lockSubscriberOrThrow(trx, organizationId, subscriberId);
    const active = await findActiveSubscriptions(trx, organizationId, subscriberId);
    let current: SubscriptionWithPlan;
    if (input.subscription_id !== undefined) {
      const named = await findSubscription(trx, organizationId, subscriberId, input.subscription_id);
      if (!named) throw subscriptionNotFound(input.subscription_id);
      if (named.status !== 'active') {
        throw conflict(
          `The subscription "${named.id}" is already canceled; only an active subscription can be changed.`,
          {
            field: 'subscription_id',
            value: named.id,
          },
        );
      }
      current = named;
    } else {
      if (active.length !== 1) {
        throw validationError(
          active.length === 0
            ? 'The subscriber has no active subscription to change; create one instead.'
            : `The subscriber has ${active.length} active subscriptions; name the one to change in subscription_id.`,
          { field: 'subscription_id', active_subscriptions: active.length },
        );
      }
      current = active[0]!;
    }
    const plan = await planOpenForSubscribing(trx, organizationId, input.plan_id);
    refuseSecondActiveSubscription(active, plan);
    const canceled = await endSubscription(trx, current);
    // The replacing subscription keeps the replaced one's anchor: its metered periods, and their usage, go on.
    const created = await insertSubscription(trx, organizationId, subscriberId, plan, current.anchored_at);
    await bumpSubscriberVersion(trx, outcome, organizationId, subscriberId);
    outcome.details = {
      subscription_id: created.id,
      canceled_subscription_id: canceled.id,
      plan_id: { from: canceled.plan_key, to: created.plan_key },
    };
    outcome.raise('subscription.changed', toChangedSubscriptionBody({ created, canceled }));
    return { created, canceled };
  });
}

export async function cancelSubscription(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  subscriberId: string,
  subscriptionId: string,
): Promise<SubscriptionWithPlan> {
  return transact(db, async (trx) => {
    await lockSubscriberOrThrow(trx, organizationId, subscriberId);
    const subscription = await findSubscription(trx, organizationId, subscriberId, subscriptionId);
    if (!subscription) throw subscriptionNotFound(subscriptionId);
    if (subscription.status === 'canceled') {
      // Already canceled: nothing changed, no details and no event.
      outcome.unchangedOn({ subscriber: subscriberId });
      return subscription;
    }
    const canceled = await endSubscription(trx, subscription);
    await bumpSubscriberVersion(trx, outcome, organizationId, subscriberId);
    outcome.details = { plan_id: canceled.plan_key };
    outcome.raise('subscription.canceled', toSubscriptionBody(canceled));
    return canceled;
  });
}

export async function listSubscriberSubscriptions(
  db: Kysely<Database>,
  organizationId: string,
  subscriberId: string,
  request: PageRequest<SubscriptionListFilter>,
): Promise<Page<SubscriptionWithPlan>> {
  if (!(await findSubscriber(db, organizationId, subscriberId))) throw subscriberNotFound(subscriberId);
  return paginate(
    request,
    {
      find: (id) => findSubscription(db, organizationId, subscriberId, id),
      what: 'a subscription of this subscriber',
    },
    (filter) => listSubscriptions(db, organizationId, subscriberId, filter),
  );
}
