import { Value } from '@sinclair/typebox/value';
import { describe, expect, it } from 'vitest';
import type { MeteredCheckResult } from '@ent/contract/evals';
import { OfrepSuccess } from '@ent/contract/ofrep';
import { toOfrep } from '../../src/features/ofrep/routes.ts';

/** Issue 35: a metered flag's value counts its live credits; the metadata says how much of it they are. */
const result = (fields: Partial<MeteredCheckResult>): MeteredCheckResult => ({
  feature: 'api_calls',
  kind: 'metered',
  limit: 1000,
  used: 1100,
  remaining: 400,
  allowed: true,
  period_start: '2031-05-01T00:00:00.000Z',
  resets_at: '2031-06-01T00:00:00.000Z',
  source: 'plan',
  credits: [
    { credit_id: 'cr_a', remaining: 150, expires_at: '2031-07-01T00:00:00.000Z' },
    { credit_id: 'cr_b', remaining: 250, expires_at: null },
  ],
  ...fields,
});

describe('toOfrep for a metered feature with credits', () => {
  it('answers remaining (allowance and credits) with credits_remaining, their sum, in the metadata', () => {
    const answer = toOfrep(result({}));
    expect(answer).toMatchObject({
      value: 400,
      metadata: { used: 1100, limit: 1000, credits_remaining: 400 },
    });
    expect(Value.Check(OfrepSuccess, answer)).toBe(true);
    expect(toOfrep(result({ used: 600, remaining: 800 })).metadata).toMatchObject({ credits_remaining: 400 });
  });

  it('leaves credits_remaining out when the subscriber holds no live credit', () => {
    const answer = toOfrep(result({ used: 250, remaining: 750, credits: [] }));
    expect(answer.value).toBe(750);
    expect(answer.metadata).not.toHaveProperty('credits_remaining');
  });
});
