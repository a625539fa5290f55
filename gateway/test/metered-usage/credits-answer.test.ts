import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ListedCredit } from '@ent/common/metering/credit-answer';
import { meteredCreditsOf } from '../../src/metering/metered-operations.ts';
import type { OperationCredit } from '../../src/metering/operation-credits.ts';

const list: readonly OperationCredit[] = [
  ['cr_promo', 5, '2026-03-10T03:00:00.000Z'],
  ['cr_ro_1', null, '2026-04-01T00:00:00.000Z'],
  ['cr_topup', 3, null],
];

describe("an answer's credits (meteredCreditsOf)", () => {
  it('shares one list between answers with the same figures, and builds a new one when any figure moves', () => {
    const untouched = meteredCreditsOf(list, { covered: 0, rollover: 4, spent: [] });
    expect(untouched.credits.map((credit) => [credit.credit_id, credit.remaining])).toEqual([
      ['cr_promo', 5],
      ['cr_ro_1', 4],
      ['cr_topup', 3],
    ]);
    expect(meteredCreditsOf(list, { covered: 0, rollover: 4, spent: [] })).toBe(untouched);

    const spent = meteredCreditsOf(list, { covered: 6, rollover: 4, spent: [5, 1] });
    expect(spent).toEqual({
      covered: 6,
      credits: [
        { credit_id: 'cr_ro_1', remaining: 3, expires_at: '2026-04-01T00:00:00.000Z' },
        { credit_id: 'cr_topup', remaining: 3, expires_at: null },
      ],
    });
    expect(meteredCreditsOf(list, { covered: 7, rollover: 4, spent: [5, 2] }).credits[0]!.remaining).toBe(2);
    expect(meteredCreditsOf(list, { covered: 7, rollover: 3, spent: [5, 2] }).credits[0]!.remaining).toBe(1);
    expect(meteredCreditsOf(list, { covered: 7, rollover: 3, spent: [5, 2, 1] }).credits[1]!.remaining).toBe(
      2,
    );
    expect(meteredCreditsOf(list, { covered: 0, rollover: 4, spent: [] })).toEqual(untouched);
    // No figures: the reply named no credits.
    expect(meteredCreditsOf(list, undefined).credits).toEqual([]);
  });

  it('keeps a changed answer only once its figures answer again, and lends the credits that did not move', () => {
    const own: readonly OperationCredit[] = [
      ['cr_a', 5, null],
      ['cr_b', 3, null],
    ];
    const first = meteredCreditsOf(own, { covered: 0, rollover: 0, spent: [] });
    const spending = meteredCreditsOf(own, { covered: 1, rollover: 0, spent: [1] });
    expect(spending.credits.map((credit) => credit.remaining)).toEqual([4, 3]);
    expect(spending.credits[1]).toBe(first.credits[1]);
    const again = meteredCreditsOf(own, { covered: 1, rollover: 0, spent: [1] });
    expect(again).not.toBe(spending);
    expect(again).toEqual(spending);
    expect(again.credits[1]).toBe(first.credits[1]);
    expect(meteredCreditsOf(own, { covered: 1, rollover: 0, spent: [1] })).toBe(again);
    const next = meteredCreditsOf(own, { covered: 2, rollover: 0, spent: [2] });
    expect(next.credits[0]!.remaining).toBe(3);
    expect(next.credits[1]).toBe(first.credits[1]);
  });
});

describe("an answer's credits as JSON (ListedCredit.listJsonText)", () => {
  const instant = fc.integer({ min: 0, max: 4_102_444_800_000 }).map((ms) => new Date(ms).toISOString());
  const listArbitrary = fc.uniqueArray(
    fc.tuple(
      fc.string({ minLength: 1, maxLength: 8 }).map((id) => `cr_${id}`),
      fc.option(fc.integer({ min: 1, max: 200_000_000_000 }), { nil: null }),
      fc.option(instant, { nil: null }),
    ),
    { maxLength: 5, selector: ([id]) => id },
  );
  const figuresArbitrary = fc.record({
    covered: fc.nat({ max: 50 }),
    rollover: fc.nat({ max: 10 }),
    spent: fc.array(fc.oneof(fc.constant(0), fc.nat({ max: 300_000_000_000 })), { maxLength: 6 }),
  });

  it('is what JSON.stringify writes and lists plain credits, however the answers before shared their credits', () => {
    fc.assert(
      fc.property(
        listArbitrary,
        fc.array(figuresArbitrary, { minLength: 1, maxLength: 12 }),
        (list, figures) => {
          for (const figure of [...figures, ...figures]) {
            const { credits } = meteredCreditsOf(list, figure);
            const plain = list.flatMap(([id, amount, expiresAt], i) => {
              const remaining = (amount ?? figure.rollover) - (figure.spent[i] ?? 0);
              return remaining > 0 ? [{ credit_id: id, remaining, expires_at: expiresAt }] : [];
            });
            expect(credits).toEqual(plain);
            expect(ListedCredit.listJsonText(credits)).toBe(JSON.stringify(plain));
            expect(ListedCredit.listJsonText(credits)).toBe(JSON.stringify(credits));
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('writes a credit made with another remaining from its original, written or not, as JSON.stringify does', () => {
    const original = new ListedCredit('cr_"é"', 7, '2026-03-10T03:00:00.000Z');
    const unwritten = original.withRemaining(123_456_789_012);
    expect(original.jsonText()).toBe(JSON.stringify(original));
    const fromWritten = original.withRemaining(3);
    const fromUnwritten = unwritten.withRemaining(45);
    const chain = fromWritten.withRemaining(2_000).withRemaining(1);
    for (const credit of [
      unwritten,
      fromWritten,
      fromUnwritten,
      chain,
      new ListedCredit('cr_x', 9, null).withRemaining(10),
    ])
      expect(credit.jsonText()).toBe(JSON.stringify(credit));
    expect(unwritten.jsonText()).toBe(JSON.stringify(unwritten)); // written once, the same text again
    // Each step written before the next, the figure growing and shrinking: the tail's place moves with it.
    let step = new ListedCredit('cr_\u{1F600}_"x"', 7, null);
    for (const remaining of [123_456, 5, 98_765_432_109, 0, 42]) {
      expect(step.jsonText()).toBe(JSON.stringify(step));
      step = step.withRemaining(remaining);
    }
    expect(step.jsonText()).toBe(JSON.stringify(step));
  });

  it('writes a plain credit as JSON.stringify does', () => {
    const credits = [{ credit_id: 'cr_"q"', remaining: 2, expires_at: null }];
    expect(ListedCredit.listJsonText(credits)).toBe(JSON.stringify(credits));
    expect(ListedCredit.listJsonText([])).toBe('[]');
  });
});
