import { describe, expect, it } from 'vitest';
import { meteredPeriodAt } from '@ent/common/metering/metered-period';
import { meteredTermsOf } from '@ent/common/resolve/resolve';
import type { CatalogDoc, SubscriberDoc } from '@ent/common/snapshots/documents';
import { operationTermsOf } from '../../src/metering/operation-terms.ts';

const catalogWith = (limit: number): CatalogDoc =>
  ({
    features: { calls: 'metered', seats: 'metered' },
    plans: {
      pro: {
        archived: false,
        grants: {
          calls: { kind: 'metered', limit, reset: 'month', anchor: 'calendar', soft: false },
          seats: { kind: 'metered', limit: 5, reset: 'day', anchor: 'subscription', soft: true },
        },
      },
    },
  }) as unknown as CatalogDoc;
const catalog = catalogWith(10);
const shared: SubscriberDoc = { exists: true, plans: ['pro'], overrides: {} };
const march = Date.parse('2026-03-10T12:00:00Z');

/** What resolving afresh gives at `nowMs`: the definition the kept terms must equal. */
function expected(catalogDoc: CatalogDoc, subscriber: SubscriberDoc, feature: string, nowMs: number) {
  const terms = meteredTermsOf(catalogDoc, subscriber, feature, nowMs);
  const { startMs, endMs } = meteredPeriodAt(terms.reset, terms.anchorMs, nowMs);
  return {
    terms,
    period: {
      startMs,
      endMs,
      startIso: new Date(startMs).toISOString(),
      endIso: endMs === null ? null : new Date(endMs).toISOString(),
    },
    memberTail: `|${feature}|${startMs}`,
    encoded: JSON.stringify([terms.limit, terms.soft ? 1 : 0, terms.source, startMs, endMs]),
  };
}

describe('terms of a metered check or consume, kept per documents and period (operation-terms.ts)', () => {
  it('answers what resolving afresh answers, shares it within the period and moves on at its end', () => {
    const first = operationTermsOf(catalog, shared, 'calls', march);
    expect(first).toMatchObject(expected(catalog, shared, 'calls', march));
    expect(operationTermsOf(catalog, shared, 'calls', march + 86_400_000)).toBe(first);
    const april = Date.parse('2026-04-01T00:00:00Z');
    expect(operationTermsOf(catalog, shared, 'calls', april - 1)).toBe(first);
    const next = operationTermsOf(catalog, shared, 'calls', april);
    expect(next).toMatchObject(expected(catalog, shared, 'calls', april));
    expect(next.memberTail).toBe(`|calls|${april}`);
    // A clock set back (the app clock in tests) lands in the earlier period again.
    expect(operationTermsOf(catalog, shared, 'calls', march)).toMatchObject(expected(catalog, shared, 'calls', march));
  });

  it('resolves again for another catalog version or another subscriber document', () => {
    const subscriber: SubscriberDoc = { exists: true, plans: ['pro'], overrides: {} };
    expect(operationTermsOf(catalog, subscriber, 'calls', march).terms.limit).toBe(10);
    // A subscriber's own document outlives a catalog version: the new catalog's limit is answered at once.
    const raised = catalogWith(20);
    expect(operationTermsOf(raised, subscriber, 'calls', march)).toMatchObject(expected(raised, subscriber, 'calls', march));
    expect(operationTermsOf(raised, subscriber, 'calls', march).terms.limit).toBe(20);
    expect(operationTermsOf(catalog, subscriber, 'calls', march).terms.limit).toBe(10);
    const resubscribed: SubscriberDoc = { exists: true, plans: [], overrides: {} };
    expect(operationTermsOf(catalog, resubscribed, 'calls', march)).toMatchObject(
      expected(catalog, resubscribed, 'calls', march),
    );
    expect(operationTermsOf(catalog, resubscribed, 'calls', march).terms.source).toBe('none');
  });

  it("keeps each subscriber document's anchors, and resolves an overridden feature every time", () => {
    const anchored: SubscriberDoc = {
      exists: true,
      plans: ['pro'],
      overrides: {},
      subscribedAt: { pro: Date.parse('2026-03-01T06:30:00Z') },
    };
    expect(operationTermsOf(catalog, anchored, 'seats', march)).toMatchObject(expected(catalog, anchored, 'seats', march));
    expect(operationTermsOf(catalog, anchored, 'seats', march).period.startMs).toBe(Date.parse('2026-03-10T06:30:00Z'));
    expect(operationTermsOf(catalog, shared, 'seats', march).period.startMs).toBe(Date.parse('2026-03-10T00:00:00Z'));
    const overridden = {
      exists: true,
      plans: ['pro'],
      overrides: { calls: { kind: 'metered', limit: 99, expiresAt: march + 60_000 } },
    } as unknown as SubscriberDoc;
    expect(operationTermsOf(catalog, overridden, 'calls', march).terms.limit).toBe(99);
    // The override expires within the period: the plan's limit from that instant on.
    expect(operationTermsOf(catalog, overridden, 'calls', march + 60_000).terms.limit).toBe(10);
  });
});
