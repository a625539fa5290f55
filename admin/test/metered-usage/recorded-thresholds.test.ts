import { describe, expect, it } from 'vitest';
import { createRecordedThresholds } from '../../src/features/metered-usage/recorded-thresholds.ts';

describe("the worker's memory of recorded thresholds", () => {
  it('knows a threshold by organization, balance and threshold', () => {
    const recorded = createRecordedThresholds();
    recorded.add('org_a', 'alice|calls|0', 100);
    expect(recorded.has('org_a', 'alice|calls|0', 100)).toBe(true);
    expect(recorded.has('org_a', 'alice|calls|0', 80)).toBe(false);
    expect(recorded.has('org_b', 'alice|calls|0', 100)).toBe(false);
    expect(recorded.has('org_a', 'alice|calls|1', 100)).toBe(false);
  });

  it('starts over when full, forgetting (never inventing) what it knew', () => {
    const recorded = createRecordedThresholds(2);
    recorded.add('org_a', 'm1', 80);
    recorded.add('org_a', 'm2', 80);
    recorded.add('org_a', 'm3', 80);
    expect(recorded.has('org_a', 'm1', 80)).toBe(false);
    expect(recorded.has('org_a', 'm2', 80)).toBe(false);
    expect(recorded.has('org_a', 'm3', 80)).toBe(true);
  });

  it('counts a balance once towards its bound, whichever of its thresholds it knows', () => {
    const recorded = createRecordedThresholds(2);
    recorded.add('org_a', 'm1', 80);
    recorded.add('org_a', 'm1', 100);
    recorded.add('org_b', 'm1', 100);
    expect(recorded.has('org_a', 'm1', 80)).toBe(true);
    expect(recorded.has('org_a', 'm1', 100)).toBe(true);
    expect(recorded.has('org_b', 'm1', 100)).toBe(true);
    expect(recorded.has('org_b', 'm1', 80)).toBe(false);
  });
});
