import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { meteredPeriodAt } from '../src/metering/metered-period.ts';
import { meteredResult, meteredTermsOf } from '../src/resolve/resolve.ts';
import type { CatalogDoc, SubscriberDoc } from '../src/snapshots/documents.ts';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const period = (reset: Parameters<typeof meteredPeriodAt>[0], anchor: string | null, now: string) => {
  const { startMs, endMs } = meteredPeriodAt(reset, anchor === null ? null : at(anchor), at(now));
  return [iso(startMs), iso(endMs)];
};

describe('calendar periods (UTC)', () => {
  it('days, Monday weeks, months, years and never', () => {
    expect(period('day', null, '2026-11-27T13:00:00Z')).toEqual([
      '2026-11-27T00:00:00.000Z',
      '2026-11-28T00:00:00.000Z',
    ]);
    // 2026-11-29 is a Sunday: its week began on Monday the 23rd.
    expect(period('week', null, '2026-11-29T23:59:59.999Z')).toEqual([
      '2026-11-23T00:00:00.000Z',
      '2026-11-30T00:00:00.000Z',
    ]);
    expect(period('week', null, '2026-11-30T00:00:00Z')).toEqual([
      '2026-11-30T00:00:00.000Z',
      '2026-12-07T00:00:00.000Z',
    ]);
    expect(period('month', null, '2026-02-28T23:59:59.999Z')).toEqual([
      '2026-02-01T00:00:00.000Z',
      '2026-03-01T00:00:00.000Z',
    ]);
    expect(period('year', null, '2026-12-31T23:00:00Z')).toEqual([
      '2026-01-01T00:00:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ]);
    expect(period('never', null, '2026-12-31T23:00:00Z')).toEqual(['1970-01-01T00:00:00.000Z', null]);
  });
});

describe('periods anchored on a subscription', () => {
  it('a month anchored on the 31st ends on the last day of a shorter month and returns to the 31st', () => {
    const anchor = '2026-01-31T10:00:00Z';
    expect(period('month', anchor, '2026-02-15T00:00:00Z')).toEqual([
      '2026-01-31T10:00:00.000Z',
      '2026-02-28T10:00:00.000Z',
    ]);
    expect(period('month', anchor, '2026-03-01T00:00:00Z')).toEqual([
      '2026-02-28T10:00:00.000Z',
      '2026-03-31T10:00:00.000Z',
    ]);
    expect(period('month', anchor, '2026-03-31T10:00:00Z')).toEqual([
      '2026-03-31T10:00:00.000Z',
      '2026-04-30T10:00:00.000Z',
    ]);
    expect(period('month', '2024-01-31T00:00:00Z', '2024-02-29T12:00:00Z')).toEqual([
      '2024-02-29T00:00:00.000Z',
      '2024-03-31T00:00:00.000Z',
    ]);
  });
  it('a year anchored on 29 February, days and weeks from the start instant, never from the start', () => {
    expect(period('year', '2024-02-29T00:00:00Z', '2025-03-01T00:00:00Z')).toEqual([
      '2025-02-28T00:00:00.000Z',
      '2026-02-28T00:00:00.000Z',
    ]);
    expect(period('day', '2026-11-20T18:30:00Z', '2026-11-27T18:29:59Z')).toEqual([
      '2026-11-26T18:30:00.000Z',
      '2026-11-27T18:30:00.000Z',
    ]);
    expect(period('week', '2026-11-20T18:30:00Z', '2026-11-27T18:30:00Z')).toEqual([
      '2026-11-27T18:30:00.000Z',
      '2026-12-04T18:30:00.000Z',
    ]);
    expect(period('never', '2026-11-20T18:30:00Z', '2030-01-01T00:00:00Z')).toEqual([
      '2026-11-20T18:30:00.000Z',
      null,
    ]);
  });
  it('every instant lies in its period, and the next period starts where this one ends (property)', () => {
    const reset = fc.constantFrom('day' as const, 'week' as const, 'month' as const, 'year' as const);
    const instant = fc.integer({ min: at('2000-01-01T00:00:00Z'), max: at('2100-01-01T00:00:00Z') });
    fc.assert(
      fc.property(reset, fc.option(instant, { nil: null }), instant, (r, anchor, now) => {
        const here = meteredPeriodAt(r, anchor, now);
        expect(here.startMs).toBeLessThanOrEqual(now);
        expect(here.endMs!).toBeGreaterThan(now);
        expect(meteredPeriodAt(r, anchor, here.endMs!).startMs).toBe(here.endMs);
        expect(meteredPeriodAt(r, anchor, here.startMs)).toEqual(here);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('metered terms across subscriptions', () => {
  const catalog: CatalogDoc = {
    features: { calls: 'metered' },
    plans: {
      small: {
        archived: false,
        grants: {
          calls: { kind: 'metered', limit: 100, reset: 'month', anchor: 'subscription', soft: false, rollover: null },
        },
      },
      daily: {
        archived: false,
        grants: { calls: { kind: 'metered', limit: 100, reset: 'day', anchor: 'calendar', soft: true, rollover: null } },
      },
      big: {
        archived: true,
        grants: { calls: { kind: 'metered', limit: 1000, reset: 'year', anchor: 'calendar', soft: false, rollover: null } },
      },
    },
  };
  const doc = (plans: string[], overrides: SubscriberDoc['overrides'] = {}): SubscriberDoc => ({
    exists: true,
    plans,
    overrides,
    subscribedAt: { small: at('2026-01-31T10:00:00Z') },
  });
  const now = at('2026-11-27T12:00:00Z');

  it('the largest limit wins with its own reset and softness; a tie takes the shorter period', () => {
    expect(meteredTermsOf(catalog, doc(['small', 'big']), 'calls', now)).toMatchObject({
      limit: 1000,
      reset: 'year',
      soft: false,
      anchorMs: null,
    });
    expect(meteredTermsOf(catalog, doc(['small', 'daily']), 'calls', now)).toMatchObject({
      limit: 100,
      reset: 'day',
      soft: true,
    });
    expect(meteredTermsOf(catalog, doc(['small']), 'calls', now)).toMatchObject({
      anchorMs: at('2026-01-31T10:00:00Z'),
      source: 'plan',
    });
  });
  it('an override replaces the limit only; nothing granted is 0 a month', () => {
    const overridden = doc(['daily'], { calls: { kind: 'metered', limit: null, expiresAt: null } });
    expect(meteredTermsOf(catalog, overridden, 'calls', now)).toMatchObject({
      limit: null,
      reset: 'day',
      soft: true,
      source: 'override',
    });
    expect(meteredTermsOf(catalog, doc([]), 'calls', now)).toMatchObject({
      limit: 0,
      reset: 'month',
      source: 'none',
    });
  });
  it('the answer: remaining, allowed and overage', () => {
    const terms = meteredTermsOf(catalog, doc(['daily']), 'calls', now);
    const p = meteredPeriodAt(terms.reset, terms.anchorMs, now);
    expect(meteredResult('calls', terms, p, 130)).toEqual({
      feature: 'calls',
      kind: 'metered',
      limit: 100,
      used: 130,
      remaining: 0,
      allowed: true,
      period_start: '2026-11-27T00:00:00.000Z',
      resets_at: '2026-11-28T00:00:00.000Z',
      source: 'plan',
      overage: 30,
      credits: [],
    });
    const hard = { ...terms, soft: false };
    expect(meteredResult('calls', hard, p, 100)).toMatchObject({ allowed: false, remaining: 0 });
    expect(meteredResult('calls', hard, p, 99)).toMatchObject({ allowed: true, remaining: 1 });
    expect(meteredResult('calls', hard, p, 99)).not.toHaveProperty('overage');
  });
});
