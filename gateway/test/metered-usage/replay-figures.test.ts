import { describe, expect, it } from 'vitest';
import { redisKeys } from '@ent/common/redis/keys';
import type { SubscriberDoc } from '@ent/common/snapshots/documents';
import { proMeteredCatalog, proSubscriber } from '../../../test-support/metered-documents.ts';
import { decodeOutcome, meteredOperation } from '../../src/metering/metered-operations.ts';

/**
 * A replayed consume's answer from its idempotency record: the figures the record kept, as text ('used k ro spent...')
 * or, once every figure is 0, possibly the integer used (metered-balance.fragment.lua): the answer lists the same
 * credits either way.
 */
const START = Date.UTC(2026, 10, 1);
const NOW = START + 86_400_000;
const catalog = proMeteredCatalog({ calls: { limit: 10 } });
const subscriber: SubscriberDoc = {
  ...proSubscriber,
  credits: {
    calls: [
      { id: 'cr_promo', amount: 3, priority: 1, effectiveAt: START, expiresAt: null, createdAt: START },
      { id: 'cr_topup', amount: 7, priority: 10, effectiveAt: START, expiresAt: null, createdAt: START },
    ],
  },
};
const keyed = meteredOperation(
  { catalog, subscriber, catalogVersion: 1, subscriberVersion: 1 },
  'ann',
  'calls',
  'c',
  2,
  NOW,
  'key-1',
  redisKeys('test'),
  'org_1',
);
const replayOf = (recorded: string) => {
  const outcome = decodeOutcome(keyed, 5, `0\n${recorded}\n${keyed.terms}`);
  if (outcome.status !== 'replayed') throw new Error(`not a replay: ${outcome.status}`);
  return outcome.answer;
};

describe("a replay's credits", () => {
  it('are the same whether the record kept the text of zero figures or the integer used', () => {
    const fromText = replayOf('4 0 0');
    expect(fromText).toMatchObject({ used: 4, remaining: 16, allowed: true });
    expect(fromText.credits).toEqual([
      { credit_id: 'cr_promo', remaining: 3, expires_at: null },
      { credit_id: 'cr_topup', remaining: 7, expires_at: null },
    ]);
    expect(replayOf('4')).toEqual(fromText);
  });

  it('answer what a spent figure left', () => {
    expect(replayOf('12 2 0 2').credits).toEqual([
      { credit_id: 'cr_promo', remaining: 1, expires_at: null },
      { credit_id: 'cr_topup', remaining: 7, expires_at: null },
    ]);
  });
});
