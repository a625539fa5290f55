import { describe, expect, it } from 'vitest';
import { meteredPeriodOf, meteredTermsOf } from '@ent/common/resolve/resolve';
import type { CatalogDoc, SubscriberDoc } from '@ent/common/snapshots/documents';
import { resolvedTermsOf } from '../../src/features/metered-usage/batch-terms.ts';

const catalog = {
  features: { calls: 'metered', seats: 'metered' },
  plans: {
    pro: {
      archived: false,
      grants: {
        calls: { kind: 'metered', limit: 10, reset: 'month', anchor: 'calendar', soft: false },
        seats: { kind: 'metered', limit: 5, reset: 'day', anchor: 'subscription', soft: true },
      },
    },
  },
} as unknown as CatalogDoc;
const shared: SubscriberDoc = { exists: true, plans: ['pro'], overrides: {} };
const march = Date.parse('2026-03-10T12:00:00Z');

/** What meteredOperation resolves at `nowMs`, the definition the cached terms must equal. */
function expected(subscriber: SubscriberDoc, feature: string, nowMs: number) {
  const terms = meteredTermsOf(catalog, subscriber, feature, nowMs);
  const period = meteredPeriodOf(terms, nowMs);
  return {
    terms,
    period,
    memberTail: `|${feature}|${period.startMs}`,
    encoded: JSON.stringify([terms.limit, terms.soft ? 1 : 0, terms.source, period.startMs, period.endMs]),
    periodStart: new Date(period.startMs).toISOString(),
    resetsAt: period.endMs === null ? null : new Date(period.endMs).toISOString(),
  };
}

describe('terms resolved once per documents and period (usage batches)', () => {
  it('answers what resolving afresh answers, shares it within the period and moves on at its end', () => {
    const first = resolvedTermsOf(catalog, shared, 'calls', march);
    expect(first).toEqual(expected(shared, 'calls', march));
    expect(resolvedTermsOf(catalog, shared, 'calls', march + 86_400_000)).toBe(first);
    const april = Date.parse('2026-04-01T00:00:00Z');
    const next = resolvedTermsOf(catalog, shared, 'calls', april);
    expect(next).not.toBe(first);
    expect(next).toEqual(expected(shared, 'calls', april));
    // A clock set back (the app clock in tests) lands in the earlier period again.
    expect(resolvedTermsOf(catalog, shared, 'calls', march)).toEqual(first);
  });

  it('keeps each subscriber document its own anchors, and resolves an overridden feature every time', () => {
    const anchored: SubscriberDoc = {
      exists: true,
      plans: ['pro'],
      overrides: {},
      subscribedAt: { pro: Date.parse('2026-03-01T06:30:00Z') },
    };
    expect(resolvedTermsOf(catalog, anchored, 'seats', march)).toEqual(expected(anchored, 'seats', march));
    expect(resolvedTermsOf(catalog, anchored, 'seats', march).period.startMs).toBe(
      Date.parse('2026-03-10T06:30:00Z'),
    );
    const overridden: SubscriberDoc = {
      exists: true,
      plans: ['pro'],
      overrides: { calls: { kind: 'metered', limit: 99, expiresAt: march + 60_000 } },
    } as unknown as SubscriberDoc;
    expect(resolvedTermsOf(catalog, overridden, 'calls', march).terms.limit).toBe(99);
    expect(resolvedTermsOf(catalog, overridden, 'calls', march + 120_000).terms.limit).toBe(10);
  });
});
