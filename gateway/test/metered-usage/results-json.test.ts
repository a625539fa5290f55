import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppError } from '@ent/common/errors/app-error';
import { meteredResultIn } from '@ent/common/resolve/resolve';
import { usageEventsJson } from '../../src/features/metered-usage/results-json.ts';
import { createMeteredResultWriter } from '../../src/features/shared/metered-result-json.ts';

const instant = fc.integer({ min: 0, max: 4_102_444_800_000 }).map((ms) => new Date(ms).toISOString());
const resultArbitrary = fc
  .record({
    feature: fc.constantFrom('calls', 'tokens', 'a.b:c-d'),
    limit: fc.option(fc.integer({ min: 0, max: 1_000_000_000_000 }), { nil: null }),
    soft: fc.boolean(),
    source: fc.constantFrom('plan' as const, 'override' as const, 'none' as const),
    periodStart: fc.constantFrom('2026-03-01T00:00:00.000Z', '2026-03-10T00:00:00.000Z'),
    resetsAt: fc.option(fc.constant('2026-04-01T00:00:00.000Z'), { nil: null }),
    used: fc.integer({ min: 0, max: 1_000_000_000_000 }),
    deducted: fc.option(fc.boolean(), { nil: undefined }),
    covered: fc.integer({ min: 0, max: 50 }),
    credits: fc.array(
      fc.record({
        credit_id: fc.string({ minLength: 1, maxLength: 12 }),
        remaining: fc.integer({ min: 1, max: 1000 }),
        expires_at: fc.option(instant, { nil: null }),
      }),
      { maxLength: 3 },
    ),
  })
  .map((r) =>
    meteredResultIn(
      r.feature,
      { limit: r.limit, soft: r.soft, source: r.source },
      r.periodStart,
      r.resetsAt,
      r.used,
      r.deducted,
      { covered: Math.min(r.covered, r.used), credits: r.credits },
    ),
  );
const errorArbitrary = fc
  .record({ status: fc.constantFrom(404, 422), message: fc.string(), value: fc.string() })
  .map(({ status, message, value }) =>
    new AppError(status, status === 404 ? 'NOT_FOUND' : 'VALIDATION_ERROR', message, {
      field: 'feature',
      value,
    }).toBody('req-1'),
  );

describe('the batch route body (results-json.ts)', () => {
  it('is exactly what JSON.stringify writes, for runs of results that share their fields and for mixed ones', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof({ arbitrary: resultArbitrary, weight: 4 }, { arbitrary: errorArbitrary, weight: 1 }),
          {
            maxLength: 30,
          },
        ),
        fc.nat({ max: 5 }),
        (results, repeats) => {
          // Runs of equal shared fields, as a batch on one feature makes them.
          const runs = results.flatMap((result) => Array.from({ length: 1 + (repeats % 3) }, () => result));
          expect(usageEventsJson(runs)).toBe(JSON.stringify({ results: runs }));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("a check's metered answer (metered-result-json.ts)", () => {
  it('is exactly what JSON.stringify writes, whatever the writer kept from the answers before', () => {
    fc.assert(
      fc.property(
        fc.array(resultArbitrary, { maxLength: 30 }),
        fc.integer({ min: 1, max: 3 }),
        (results, max) => {
          // A small bound makes the writer start over now and then, as a full one does.
          const write = createMeteredResultWriter(max);
          for (const result of [...results, ...results]) expect(write(result)).toBe(JSON.stringify(result));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('writes a credit list whose text it kept as JSON.stringify does, when answers share the list', () => {
    fc.assert(
      fc.property(resultArbitrary, resultArbitrary, (first, second) => {
        // The second answer shares the first one's list, as the answers of consumes of the allowance do.
        const write = createMeteredResultWriter();
        const sharing = { ...second, credits: first.credits };
        for (const result of [first, sharing, first]) expect(write(result)).toBe(JSON.stringify(result));
      }),
      { numRuns: 300 },
    );
  });
});
