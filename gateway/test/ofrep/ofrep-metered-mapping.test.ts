import { Value } from '@sinclair/typebox/value';
import { describe, expect, it } from 'vitest';
import type { MeteredCheckResult } from '@ent/contract/evals';
import { OfrepSuccess } from '@ent/contract/ofrep';
import { toOfrep } from '../../src/features/ofrep/routes.ts';

/** DESIGN.md §5 "OFREP": a metered feature is the integer that remains, with `{used, limit, resets_at}`. */
const result = (overrides: Partial<MeteredCheckResult>): MeteredCheckResult => ({
  feature: 'api_calls',
  kind: 'metered',
  limit: 1000,
  used: 250,
  remaining: 750,
  allowed: true,
  period_start: '2031-05-01T00:00:00.000Z',
  resets_at: '2031-06-01T00:00:00.000Z',
  source: 'plan',
  credits: [],
  ...overrides,
});

describe('toOfrep for a metered feature', () => {
  it.each<[string, Partial<MeteredCheckResult>, ReturnType<typeof toOfrep>]>([
    [
      'a hard limit: what remains, with used, limit and resets_at',
      {},
      {
        key: 'api_calls',
        value: 750,
        reason: 'STATIC',
        variant: 'plan',
        metadata: {
          source: 'plan',
          kind: 'metered',
          unlimited: false,
          used: 250,
          limit: 1000,
          resets_at: '2031-06-01T00:00:00.000Z',
        },
      },
    ],
    [
      'used up: 0',
      { used: 1000, remaining: 0, allowed: false },
      {
        key: 'api_calls',
        value: 0,
        reason: 'STATIC',
        variant: 'plan',
        metadata: {
          source: 'plan',
          kind: 'metered',
          unlimited: false,
          used: 1000,
          limit: 1000,
          resets_at: '2031-06-01T00:00:00.000Z',
        },
      },
    ],
    [
      'unlimited: MAX_SAFE_INTEGER, no limit in the metadata (OFREP holds no nulls)',
      { limit: null, remaining: null },
      {
        key: 'api_calls',
        value: Number.MAX_SAFE_INTEGER,
        reason: 'STATIC',
        variant: 'plan',
        metadata: {
          source: 'plan',
          kind: 'metered',
          unlimited: true,
          used: 250,
          resets_at: '2031-06-01T00:00:00.000Z',
        },
      },
    ],
    [
      'reset never, from an override: no resets_at, TARGETING_MATCH',
      { resets_at: null, source: 'override', limit: 300, remaining: 50 },
      {
        key: 'api_calls',
        value: 50,
        reason: 'TARGETING_MATCH',
        variant: 'override',
        metadata: { source: 'override', kind: 'metered', unlimited: false, used: 250, limit: 300 },
      },
    ],
    [
      'soft, past the limit: 0 remain (allowed stays true on the check route)',
      { limit: 100, remaining: 0, overage: 150 },
      {
        key: 'api_calls',
        value: 0,
        reason: 'STATIC',
        variant: 'plan',
        metadata: {
          source: 'plan',
          kind: 'metered',
          unlimited: false,
          used: 250,
          limit: 100,
          resets_at: '2031-06-01T00:00:00.000Z',
        },
      },
    ],
  ])('%s', (_name, overrides, expected) => {
    const mapped = toOfrep(result(overrides));
    expect(mapped).toEqual(expected);
    expect(Value.Check(OfrepSuccess, mapped)).toBe(true);
    // The OFREP schema: metadata values are strings, numbers or booleans.
    for (const value of Object.values(mapped.metadata))
      expect(['string', 'number', 'boolean']).toContain(typeof value);
  });
});
