import type {
  CreditLine,
  ImportRecordLine,
  OverrideLine,
  SubscriberLine,
  SubscriptionLine,
} from '@ent/contract/import-lines';

type LinesByType = ReadonlyMap<ImportRecordLine['type'], readonly { record: ImportRecordLine }[]>;

/** The order every statement that locks subscriber rows takes them in (`ORDER BY subscriber_id COLLATE "C"`). */
export const bySubscriberId = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

const subscriberIdsOf = (lines: LinesByType, type: ImportRecordLine['type']) =>
  (lines.get(type) ?? []).map(
    ({ record }) => (record as SubscriberLine | SubscriptionLine | OverrideLine | CreditLine).subscriber_id,
  );

/**
 * The subscribers an import batch must lock in id order before its statements run, or none when those statements
 * already take each existing subscriber row for the first time in ascending id order.
 *
 * A batch locks subscribers statement by statement (apply-batch.ts): the subscriber lines' upsert of those with a
 * name (in id order), subscriptions (in id order), overrides (one line at a time, in line order), credits (in id
 * order). Each is sorted, but they follow each other: a batch holding cus_c (a subscription) while it waits for
 * cus_b (an override) deadlocks with a writer holding cus_b that waits for cus_c. Locking every named subscriber
 * first costs one more statement of index lookups per batch (about a tenth of a batch's Postgres time when it
 * creates new subscribers), so it is taken only when the order is not ascending already: a batch of one record
 * type, the shape of an export, or a subscriber line followed by its subscription, pays nothing.
 * Each step counts the ids it may lock or wait on that no earlier step holds: an unnamed subscriber line's upsert
 * waits on a row another transaction is changing but leaves it unlocked, so it counts in the order and not as held
 * (a superset of what is locked only ever asks for the lock). A row another transaction is still inserting is seen by
 * no lock taken first: two imports creating the same new subscribers in opposite orders can still deadlock, and
 * Postgres's detection ends one, whose batch is retried.
 */
export function subscribersToLockFirst(lines: LinesByType): string[] {
  const winners = new Map<string, SubscriberLine>();
  for (const { record } of lines.get('subscriber') ?? []) {
    const line = record as SubscriberLine;
    winners.set(line.subscriber_id, line);
  }
  const held = new Set<string>();
  let last: string | null = null;
  let ascending = true;
  // `holds: false`: the step may wait on each row (for a transaction changing it) but holds none afterwards.
  const take = (ids: readonly string[], sorted: boolean, holds = true) => {
    const fresh = [...new Set(ids)].filter((id) => !held.has(id));
    if (sorted) fresh.sort(bySubscriberId);
    for (const id of fresh) {
      if (last !== null && bySubscriberId(last, id) >= 0) ascending = false;
      if (holds) held.add(id);
      last = id;
    }
  };
  const named: string[] = [];
  const unnamed: string[] = [];
  for (const [id, line] of winners) (line.name === undefined ? unnamed : named).push(id);
  take(named, true);
  // The unnamed lines' `ON CONFLICT DO NOTHING` locks no existing row, but waits for one another transaction is
  // inserting or changing, in its own (sorted) statement after the named lines'.
  take(unnamed, true, false);
  take(subscriberIdsOf(lines, 'subscription'), true);
  take(subscriberIdsOf(lines, 'override'), false);
  take(subscriberIdsOf(lines, 'credit'), true);
  if (ascending) return [];
  const all = new Set<string>();
  for (const type of ['subscriber', 'subscription', 'override', 'credit'] as const)
    for (const id of subscriberIdsOf(lines, type)) all.add(id);
  return [...all].sort(bySubscriberId);
}
