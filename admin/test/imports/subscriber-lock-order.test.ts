import { describe, expect, it } from 'vitest';
import type { ImportRecordLine } from '@ent/contract/import-lines';
import { subscribersToLockFirst } from '../../src/features/imports/subscriber-lock-order.ts';

const subscriber = (id: string, name?: string): ImportRecordLine => ({
  type: 'subscriber',
  subscriber_id: id,
  ...(name === undefined ? {} : { name }),
});
const subscription = (id: string): ImportRecordLine => ({
  type: 'subscription',
  subscriber_id: id,
  plan_id: 'pro',
});
const override = (id: string): ImportRecordLine => ({
  type: 'override',
  subscriber_id: id,
  feature_key: 'seats',
  kind: 'limit',
  limit: 5,
});
const credit = (id: string): ImportRecordLine => ({
  type: 'credit',
  credit_id: `cr_${id}`,
  subscriber_id: id,
  feature: 'api-calls',
  amount: 10,
});

/** The records grouped by type, as apply-batch.ts groups a batch's lines. */
function byType(records: ImportRecordLine[]) {
  const lines = new Map<ImportRecordLine['type'], { record: ImportRecordLine }[]>();
  for (const record of records) lines.set(record.type, [...(lines.get(record.type) ?? []), { record }]);
  return lines;
}

describe('the subscribers an import batch locks first', () => {
  it.each<[string, ImportRecordLine[]]>([
    ['one record type', [subscription('b'), subscription('a'), subscription('c')]],
    [
      'named subscribers followed by their subscriptions',
      [subscriber('b', 'B'), subscription('b'), subscriber('a', 'A'), subscription('a')],
    ],
    [
      'overrides in ascending line order after lower ids',
      [subscription('a'), override('b'), override('c'), credit('d')],
    ],
    [
      'a later step naming only ids held already',
      [subscriber('c', 'C'), subscriber('a', 'A'), override('c'), credit('a')],
    ],
    [
      'unnamed subscriber lines above the named ones',
      [subscriber('a', 'A'), subscriber('b'), subscription('c')],
    ],
  ])('are none when the statements already lock in ascending order: %s', (_case, records) => {
    expect(subscribersToLockFirst(byType(records))).toEqual([]);
  });

  it.each<[string, ImportRecordLine[]]>([
    [
      'a subscription before lower overrides, in descending line order',
      [subscription('c'), override('b'), override('a')],
    ],
    ['a credit below a subscription', [subscription('b'), credit('a')]],
    // An unnamed subscriber line's upsert may wait on an existing row another transaction changes, and leaves it
    // unlocked: its subscription takes it later.
    ['an unnamed subscriber below a named one', [subscriber('b', 'B'), subscriber('a')]],
    ['an unnamed subscriber, then its subscription', [subscriber('a'), subscription('a')]],
  ])('are every subscriber the batch names, in id order, when they would not: %s', (_case, records) => {
    const ids = [...new Set(records.map((r) => (r as { subscriber_id: string }).subscriber_id))].sort();
    expect(subscribersToLockFirst(byType(records))).toEqual(ids);
  });

  it('orders ids by their bytes, as the lock statements do (COLLATE "C"): upper case before lower', () => {
    expect(subscribersToLockFirst(byType([subscription('b'), credit('B'), credit('a')]))).toEqual([
      'B',
      'a',
      'b',
    ]);
  });
});
