import { transact } from '@ent/common/outbox/record';
import type { Kysely } from 'kysely';
import type { Database, Subscriber } from '@ent/common/db/database';
import { conflict, notFound } from '@ent/common/errors/app-error';
import type { CreateSubscriberBody, SubscriberBody, UpdateSubscriberBody } from '@ent/contract/subscribers';
import type { WriteOutcome } from '../shared/write/outcome.ts';
import { changedFields } from '../shared/changes.ts';
import { bumpSubscriberVersion } from '../shared/versions.ts';
import {
  findSubscriber,
  insertSubscriber,
  listSubscribers as listSubscriberRows,
  lockSubscriber,
  updateSubscriberName,
  type SubscriberListFilter,
} from './store.ts';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';

export const toSubscriberBody = (subscriber: Subscriber): SubscriberBody => ({
  subscriber_id: subscriber.subscriber_id,
  name: subscriber.name,
  created_at: subscriber.created_at.toISOString(),
  updated_at: subscriber.updated_at.toISOString(),
});

export const subscriberNotFound = (subscriberId: string) =>
  notFound(`No subscriber with id "${subscriberId}".`, { field: 'subscriber_id', value: subscriberId });

export async function createSubscriber(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  input: CreateSubscriberBody,
): Promise<Subscriber> {
  return transact(db, async (trx) => {
    if (!(await insertSubscriber(trx, organizationId, input))) {
      throw conflict(`A subscriber with id "${input.subscriber_id}" already exists.`, {
        field: 'subscriber_id',
        value: input.subscriber_id,
      });
    }
    await bumpSubscriberVersion(trx, outcome, organizationId, input.subscriber_id);
    const created = (await lockSubscriber(trx, organizationId, input.subscriber_id))!;
    outcome.details = { subscriber_id: created.subscriber_id, name: created.name };
    outcome.raise('subscriber.created', toSubscriberBody(created));
    return created;
  });
}

/** The subscriber after the write; the outcome's details name what changed (null: nothing did). */
export async function updateSubscriber(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  subscriberId: string,
  input: UpdateSubscriberBody,
): Promise<Subscriber> {
  return transact(db, async (trx) => {
    const before = await lockSubscriber(trx, organizationId, subscriberId);
    if (!before) throw subscriberNotFound(subscriberId);
    const details = changedFields(before, input, ['name']);
    if (!details) {
      outcome.unchangedOn({ subscriber: subscriberId });
      return before;
    }
    await updateSubscriberName(trx, organizationId, subscriberId, input.name);
    await bumpSubscriberVersion(trx, outcome, organizationId, subscriberId);
    const subscriber = (await lockSubscriber(trx, organizationId, subscriberId))!;
    outcome.details = details;
    outcome.raise('subscriber.updated', toSubscriberBody(subscriber));
    return subscriber;
  });
}

export async function getSubscriber(
  db: Kysely<Database>,
  organizationId: string,
  subscriberId: string,
): Promise<Subscriber> {
  const subscriber = await findSubscriber(db, organizationId, subscriberId);
  if (!subscriber) throw subscriberNotFound(subscriberId);
  return subscriber;
}

/** The organization's subscribers, one page. */
export function listSubscribers(
  db: Kysely<Database>,
  organizationId: string,
  request: PageRequest<SubscriberListFilter>,
): Promise<Page<Subscriber>> {
  return paginate(
    request,
    { find: (id) => findSubscriber(db, organizationId, id), what: 'a subscriber of this organization' },
    (filter) => listSubscriberRows(db, organizationId, filter),
  );
}

/**
 * A subscriber, read or locked (`FOR UPDATE`, in the caller's transaction): what subscriptions and overrides take
 * before they change what the subscriber is entitled to.
 */
export { findSubscriber, lockSubscriber } from './store.ts';
