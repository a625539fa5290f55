import { describe, expect, it } from 'vitest';
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
});
