import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { creditBalanceDirtyMember, meteredMember } from '@ent/common/redis/keys';
import type { CreditDoc, SubscriberDoc } from '@ent/common/snapshots/documents';
import { snapshotStore } from '@ent/common/snapshots/store';
import { answerOf, meteredOperation, type MeteredKind } from '../../src/metering/metered-operations.ts';
import { proMeteredCatalog } from '../../../test-support/metered-documents.ts';
import { meteringTestRedis, unpersistedBalances } from '../../../test-support/metering-redis.ts';
import { applyModel, modelAnswer, modelState, type ModelOperation } from './credit-model.ts';

const { keys, redis } = meteringTestRedis();
const org = 'org_credits';
const START = Date.parse('2026-03-10T00:00:00Z');
const MARCH = Date.parse('2026-03-01T00:00:00Z'); // the one period the test's days stay in
const clock = new ManualClock(START);

/** Limits of every kind: hard, soft, unlimited, none left; all monthly, so the test's days stay in one period. */
const catalog = proMeteredCatalog({
  hard: { limit: 5 },
  soft: { limit: 3, soft: true },
  open: { limit: null },
  none: { limit: 0 },
});
const TERMS = {
  hard: { limit: 5, soft: false },
  soft: { limit: 3, soft: true },
  open: { limit: null, soft: false },
  none: { limit: 0, soft: false },
} as const;
type Feature = keyof typeof TERMS;

const HOUR = 3_600_000;

beforeAll(async () => {
  await snapshotStore(redis, keys).putCatalog(org, { version: 3, doc: catalog });
  await redis.set(keys.meteredReady(org), '1');
});

const balances = () => unpersistedBalances({ redis, keys, clock });

const subscriberOf = (feature: Feature, credits: CreditDoc[]): SubscriberDoc => ({
  exists: true,
  plans: ['pro'],
  overrides: {},
  subscribedAt: { pro: START - 40 * 86_400_000 },
  ...(credits.length > 0 ? { credits: { [feature]: credits } } : {}),
});

const operation = (
  subscriberId: string,
  subscriber: SubscriberDoc,
  feature: Feature,
  kind: MeteredKind,
  amount: number,
) =>
  meteredOperation(
    { catalog, subscriber, catalogVersion: 3, subscriberVersion: 0 },
    subscriberId,
    feature,
    kind,
    amount,
    clock.now(),
    '',
    keys,
    org,
  );

// Instants (hours after START) credits start and end at, so effective and expiry instants fall between operations.
const instant = fc.integer({ min: 0, max: 12 });
const creditArbitrary = fc.record({
  amount: fc.integer({ min: 1, max: 6 }),
  priority: fc.integer({ min: 1, max: 3 }),
  effectiveAt: instant,
  lasts: fc.option(fc.integer({ min: 1, max: 12 }), { nil: null }),
  createdAt: fc.integer({ min: 0, max: 3 }),
});
// Weighted towards spending past the allowance and then giving part of it back, where the order shows.
const operationArbitrary: fc.Arbitrary<ModelOperation> = fc.oneof(
  { arbitrary: fc.constant({ kind: 'r' as const }), weight: 1 },
  {
    arbitrary: fc.record({ kind: fc.constant('c' as const), amount: fc.integer({ min: 1, max: 6 }) }),
    weight: 4,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('d' as const),
      amount: fc.integer({ min: -4, max: 8 }).filter((n) => n !== 0),
    }),
    weight: 4,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('s' as const), amount: fc.integer({ min: 0, max: 15 }) }),
    weight: 1,
  },
);

let runs = 0;

describe('credits spent in the documented order (metered-balance.fragment.lua against a plain model)', () => {
  it('random credits, priorities, expiries, consumes, deltas and sets: Redis and the answer match the model', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<Feature>('hard', 'soft', 'open', 'none'),
        fc.array(creditArbitrary, { maxLength: 5 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), operationArbitrary), {
          minLength: 1,
          maxLength: 14,
        }),
        async (feature, creditSpecs, steps) => {
          const subscriberId = `s${runs++}`;
          const credits: CreditDoc[] = creditSpecs.map((spec, i) => ({
            id: `cr_${String.fromCharCode(97 + ((i * 7) % 26))}${i}`,
            amount: spec.amount,
            priority: spec.priority,
            effectiveAt: START + spec.effectiveAt * HOUR,
            expiresAt: spec.lasts === null ? null : START + (spec.effectiveAt + spec.lasts) * HOUR,
            createdAt: START - spec.createdAt * HOUR,
          }));
          const subscriber = subscriberOf(feature, credits);
          const meter = balances();
          const state = modelState();
          const terms = TERMS[feature];
          clock.set(START);
          for (const [hours, step] of steps) {
            clock.advance(hours * HOUR);
            const now = clock.now();
            const amount = step.kind === 'r' ? 0 : step.amount;
            const op = operation(subscriberId, subscriber, feature, step.kind, amount);
            const applied = applyModel(state, terms, credits, now, step);
            const [outcome] = await meter.apply(org, [op]);
            expect(outcome).toMatchObject({ status: applied ? 'applied' : 'refused', used: state.used });
            const answer = answerOf(op, outcome as { status: 'applied' | 'refused'; used: number });
            const expected = modelAnswer(state, terms, credits, now);
            expect({
              remaining: answer.remaining,
              overage: answer.overage,
              credits: answer.credits.map(({ credit_id, remaining }) => ({ credit_id, remaining })),
            }).toEqual(expected);
            if (step.kind === 'c') expect(answer.allowed).toBe(applied);
          }
          const stored = await redis.hgetall(keys.creditSpent(org, subscriberId, feature));
          for (const credit of credits) {
            expect(Number(stored[credit.id] ?? 0), credit.id).toBe(state.spent.get(credit.id) ?? 0);
          }
          if (state.spent.size > 0 && [...state.spent.values()].some((n) => n > 0)) {
            expect(
              await redis.sismember(
                keys.meteredDirty(org),
                creditBalanceDirtyMember(meteredMember(subscriberId, feature, MARCH)),
              ),
            ).toBe(1);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
