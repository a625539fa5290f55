import { describe, expect, it } from 'vitest';
import { niceCeiling, usageScale } from '../src/pages/usage/chart-scale.ts';

describe("the usage chart's scale", () => {
  it("is scaled to a new organization's few evals, not to its allotment, and names the lines above it", () => {
    const scale = usageScale(7, 250_000);
    expect(scale.top).toBe(8);
    expect(scale.shown).toEqual([]);
    expect(scale.above).toEqual([
      { percent: 80, value: 200_000 },
      { percent: 100, value: 250_000 },
    ]);
    // The month's count fills most of the axis.
    expect(7 / scale.top).toBeGreaterThan(0.5);
  });

  it('reaches the 80% and 100% lines once the count is near them', () => {
    expect(usageScale(212_345, 250_000)).toEqual({
      top: 300_000,
      ticks: [0, 60_000, 120_000, 180_000, 240_000, 300_000],
      shown: [
        { percent: 80, value: 200_000 },
        { percent: 100, value: 250_000 },
      ],
      above: [],
    });
    // Past the allotment: both lines, and the count on the axis.
    const over = usageScale(400_000, 250_000);
    expect(over.shown.map((line) => line.percent)).toEqual([80, 100]);
    expect(over.top).toBeGreaterThanOrEqual(400_000);
  });

  it('shows the 80% line alone when only it is in reach', () => {
    const scale = usageScale(150_000, 250_000);
    expect(scale.shown).toEqual([{ percent: 80, value: 200_000 }]);
    expect(scale.above).toEqual([{ percent: 100, value: 250_000 }]);
    expect(scale.top).toBeGreaterThan(200_000);
  });

  it('has no lines without a cap, and a small axis for an empty month', () => {
    expect(usageScale(0, null)).toEqual({ top: 5, ticks: [0, 1, 2, 3, 4, 5], shown: [], above: [] });
    expect(usageScale(12_345, null).top).toBe(15_000);
    expect(usageScale(0, 0).shown).toEqual([]);
    // A first eval is most of the axis.
    expect(usageScale(1, 250_000).top).toBe(1.2);
  });

  it('puts whole, evenly spaced ticks on the axis', () => {
    expect(usageScale(7, null).ticks).toEqual([0, 2, 4, 6, 8]);
    expect(usageScale(10, null).ticks).toEqual([0, 3, 6, 9, 12]);
    expect(usageScale(1, null).ticks).toEqual([0, 1]);
    expect(usageScale(200_000, null).ticks).toEqual([0, 50_000, 100_000, 150_000, 200_000, 250_000]);
  });

  it('rounds the top up to the next round number', () => {
    expect([0.9, 1, 1.1, 2.2, 3, 6, 11, 27.5, 212_345 * 1.1].map(niceCeiling)).toEqual([
      1, 1, 1.2, 2.5, 3, 6, 12, 30, 250_000,
    ]);
  });
});
