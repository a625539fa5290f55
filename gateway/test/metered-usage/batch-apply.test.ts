import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import type { CreditDoc, SubscriberDoc } from '@ent/common/snapshots/documents';
import {
  meteredOperation,
  type MeteredKind,
  type MeteredOperation,
  type MeteredOutcome,
} from '../../src/metering/metered-operations.ts';
import { proMeteredCatalog } from '../../../test-support/metered-documents.ts';
import {
  OPEN_ARRANGEMENT,
  SEEDED_VERSIONS,
  meteringTestRedis,
  openEvalMeter,
  seededOrganizations,
  unpersistedBalances,
} from '../../../test-support/metering-redis.ts';

/**
 * usage-apply-6.lua buffers a batch (metered-store.fragment.lua): each balance, credit hash and idempotency record is
 * read once and written once, however many events touch it. Whatever the events, one call must answer and leave the
 * balances, credits, records and dirty set exactly as the same operations applied one command at a time: one gate
 * call each (eval-gate-batch-8.lua, which does not buffer), in order.
 */
const { keys, redis } = meteringTestRedis();
const START = Date.parse('2026-03-10T00:00:00Z');
const FEBRUARY = Date.parse('2026-02-10T00:00:00Z');
const HOUR = 3_600_000;
const clock = new ManualClock(START);

const catalog = proMeteredCatalog({
  hard: { limit: 5 },
  soft: { limit: 3, soft: true },
  open: { limit: null, reset: 'never' },
  rolls: { limit: 4, rollover: 3 },
});
const FEATURES = ['hard', 'soft', 'open', 'rolls'] as const;

const credit = (id: string, amount: number, priority: number, expiresAt: number | null): CreditDoc => ({
  id,
  amount,
  priority,
  effectiveAt: START - 48 * HOUR,
  expiresAt,
  createdAt: START - 72 * HOUR,
});
/** Three subscribers: one without credits, two with credits on every feature (spent in a different order). */
const subscribers: Record<string, SubscriberDoc> = {
  plain: { exists: true, plans: ['pro'], overrides: {}, subscribedAt: { pro: START - 60 * 86_400_000 } },
  topped: {
    exists: true,
    plans: ['pro'],
    overrides: {},
    subscribedAt: { pro: START - 60 * 86_400_000 },
    credits: Object.fromEntries(
      FEATURES.map((f) => [f, [credit('cr_a', 3, 1, START + 24 * HOUR), credit('cr_b', 2, 5, null)]]),
    ),
  },
  promo: {
    exists: true,
    plans: ['pro'],
    overrides: {},
    subscribedAt: { pro: START - 60 * 86_400_000 },
    credits: Object.fromEntries(FEATURES.map((f) => [f, [credit('cr_c', 4, 2, null)]])),
  },
};
const SUBSCRIBERS = Object.keys(subscribers);
/** Idempotency keys; the third holds a byte usage-apply-6.lua separates values with (a key is an argument of its own). */
const KEYS = ['k1', 'k2', 'k\u001f3'];

const ARRANGEMENT = { ...OPEN_ARRANGEMENT, burstPerSecond: 1_000_000 };

const organization = seededOrganizations({ redis, keys, catalog, subscribers, arrangement: ARRANGEMENT });

const usage = () => unpersistedBalances({ redis, keys, clock });
const gateMeter = () => openEvalMeter({ redis, keys, loadArrangement: async () => ARRANGEMENT });

/** One operation in a gate call of its own: the unbuffered rule. */
async function gated(meter: ReturnType<typeof gateMeter>, org: string, op: MeteredOperation) {
  const result = await meter.gate({
    organizationId: org,
    subscriberId: op.subscriberId,
    nowMs: clock.now(),
    metered: [op],
  });
  if (result.outcome !== 'counted') throw new Error(`the gate call answered ${result.outcome}`);
  return result.metered![0]!;
}

interface Step {
  subscriber: string;
  feature: (typeof FEATURES)[number];
  kind: MeteredKind;
  amount: number;
  key: string;
}

/** The balances the operations were resolved to, by organization: where dump() looks. */
const membersOf = new Map<string, Set<string>>();

function operationOf(org: string, step: Step): MeteredOperation {
  const op = meteredOperation(
    { catalog, subscriber: subscribers[step.subscriber]!, ...SEEDED_VERSIONS },
    step.subscriber,
    step.feature,
    step.kind,
    step.kind === 'r' ? 0 : step.amount,
    clock.now(),
    step.key,
    keys,
    org,
  );
  membersOf.set(org, (membersOf.get(org) ?? new Set()).add(op.member));
  return op;
}

/**
 * Every key the operations can touch (their balances, credits' spent, the records of KEYS, the dirty set), named
 * without the organization, with its value and its expiry to the minute.
 */
async function dump(org: string): Promise<Record<string, unknown>> {
  const names = [
    keys.meteredDirty(org),
    ...KEYS.map((key) => keys.usageIdempotency(org, key)),
    ...SUBSCRIBERS.flatMap((subscriber) => FEATURES.map((f) => keys.creditSpent(org, subscriber, f))),
    ...[...(membersOf.get(org) ?? [])].sort().map((member) => keys.meteredBalance(org, member)),
  ];
  const out: Record<string, unknown> = {};
  for (const name of names) {
    const type = await redis.type(name);
    if (type === 'none') continue;
    const value =
      type === 'hash'
        ? await redis.hgetall(name)
        : type === 'set'
          ? (await redis.smembers(name)).sort()
          : await redis.get(name);
    const ttl = await redis.pttl(name);
    out[name.replace(`{${org}}`, '{org}')] = {
      value,
      expiresInMinutes: ttl < 0 ? ttl : Math.round(ttl / 60_000),
    };
  }
  return out;
}

const stepArbitrary: fc.Arbitrary<Step> = fc.record({
  subscriber: fc.constantFrom(...SUBSCRIBERS),
  feature: fc.constantFrom(...FEATURES),
  kind: fc.constantFrom<MeteredKind>('r', 'c', 'c', 'd', 'd', 's'),
  amount: fc.integer({ min: 1, max: 6 }),
  key: fc.constantFrom('', '', '', ...KEYS),
});
// Negative deltas give back what credits covered; a step may repeat an earlier one whole (a retried event).
const stepsArbitrary = fc
  .array(
    fc.oneof(
      { arbitrary: stepArbitrary.map((step) => ({ step })), weight: 5 },
      { arbitrary: fc.nat().map((repeat) => ({ repeat })), weight: 1 },
    ),
    { minLength: 1, maxLength: 40 },
  )
  .map((items) => {
    const steps: Step[] = [];
    for (const item of items) {
      if ('step' in item) {
        const { step } = item;
        steps.push(step.kind === 'd' && step.amount % 3 === 0 ? { ...step, amount: -step.amount } : step);
      } else if (steps.length > 0) steps.push(steps[item.repeat % steps.length]!);
    }
    return steps;
  })
  .filter((steps) => steps.length > 0);

describe('a buffered batch (usage-apply-6.lua through metered-store.fragment.lua)', () => {
  it('answers and leaves Redis exactly as the same operations one gate call each, in order', async () => {
    const meter = usage();
    const gate = gateMeter();
    await fc.assert(
      fc.asyncProperty(
        fc.array(stepArbitrary, { maxLength: 4 }),
        fc.array(stepArbitrary, { maxLength: 4 }),
        stepsArbitrary,
        async (february, before, steps) => {
          const [batched, oneByOne] = [await organization(), await organization()];
          // The same history in both: last period's usage (what a rollover reads), then earlier calls of this one
          // (records a key replays from, balances the batch finds).
          for (const org of [batched, oneByOne]) {
            clock.set(FEBRUARY);
            for (const step of february) await gated(gate, org, operationOf(org, step));
            clock.set(START);
            for (const step of before) await gated(gate, org, operationOf(org, step));
          }
          const together = await meter.apply(
            batched,
            steps.map((step) => operationOf(batched, step)),
          );
          const apart: MeteredOutcome[] = [];
          for (const step of steps) apart.push(await gated(gate, oneByOne, operationOf(oneByOne, step)));
          expect(together).toEqual(apart);
          expect(await dump(batched)).toEqual(await dump(oneByOne));
        },
      ),
      { numRuns: 50 },
    );
  }, 120_000);

  it('applies a thousand events on one balance with credits in one call, spending the allowance, then credits', async () => {
    const org = await organization();
    const meter = usage();
    const step: Step = { subscriber: 'topped', feature: 'hard', kind: 'c', amount: 1, key: '' };
    const outcomes = await meter.apply(
      org,
      Array.from({ length: 1000 }, () => operationOf(org, step)),
    );
    // 5 of allowance, then cr_a's 3 and cr_b's 2: ten consumes fit, the rest are refused.
    expect(outcomes.filter((outcome) => outcome.status === 'applied')).toHaveLength(10);
    expect(outcomes[9]).toEqual({
      status: 'applied',
      used: 10,
      credits: { covered: 5, rollover: 0, spent: [3, 2] },
    });
    expect(outcomes[999]).toMatchObject({ status: 'refused', used: 10 });
    const member = operationOf(org, step).member;
    expect(await redis.hgetall(keys.meteredBalance(org, member))).toMatchObject({ u: '10', k: '5', r: '10' });
    expect(await redis.hgetall(keys.creditSpent(org, 'topped', 'hard'))).toEqual({ cr_a: '3', cr_b: '2' });
  });
});
