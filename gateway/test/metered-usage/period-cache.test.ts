import { describe, expect, it } from 'vitest';
import { meteredPeriodAt } from '@ent/common/metering/metered-period';
import { createPeriodCache } from '../../src/metering/period-cache.ts';

const at = (iso: string) => Date.parse(iso);
const DAY = 86_400_000;

describe('the gateway period cache (period-cache.ts)', () => {
  it('answers every instant as meteredPeriodAt does, across boundaries, anchors and both directions of time', () => {
    const periodOf = createPeriodCache(3);
    const anchor = at('2026-01-31T10:30:00Z');
    const terms = [
      { reset: 'month', anchorMs: null },
      { reset: 'day', anchorMs: null },
      { reset: 'week', anchorMs: anchor },
      { reset: 'month', anchorMs: anchor },
      { reset: 'year', anchorMs: anchor },
      { reset: 'never', anchorMs: null },
      { reset: 'never', anchorMs: anchor },
    ] as const;
    const start = at('2025-12-30T00:00:00Z');
    // Forwards over boundaries, then backwards (a gateway whose clock was set back), with more terms than it keeps.
    const instants = [...Array.from({ length: 200 }, (_, i) => start + i * 0.37 * DAY)];
    for (const nowMs of [...instants, ...instants.reverse(), anchor - 1, anchor, anchor + 1]) {
      for (const t of terms) {
        const period = periodOf(t, nowMs);
        expect({ startMs: period.startMs, endMs: period.endMs }).toEqual(meteredPeriodAt(t.reset, t.anchorMs, nowMs));
        expect(period.startIso).toBe(new Date(period.startMs).toISOString());
        expect(period.endIso).toBe(period.endMs === null ? null : new Date(period.endMs).toISOString());
      }
    }
  });

  it('keeps one period per (reset, anchor) until it ends', () => {
    const periodOf = createPeriodCache();
    const terms = { reset: 'month', anchorMs: null } as const;
    const first = periodOf(terms, at('2026-03-10T12:00:00Z'));
    expect(periodOf(terms, at('2026-03-31T23:59:59.999Z'))).toBe(first);
    const next = periodOf(terms, at('2026-04-01T00:00:00Z'));
    expect(next).not.toBe(first);
    expect(next.startIso).toBe('2026-04-01T00:00:00.000Z');
  });
});
