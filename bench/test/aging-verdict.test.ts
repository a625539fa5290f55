import { describe, expect, it } from 'vitest';
import {
  compare,
  roundOrder,
  verdictOf,
  type AgingRound,
  type GatewayFigures,
  type GatewayName,
} from '../src/modes/aging.ts';

/** A gateway's figures in one round: only what the ratios read matters. */
const figures = (rps: number, cpuUs: number): GatewayFigures => ({
  rps,
  p50: 1,
  p95: 2,
  p99: 3,
  requests: rps * 10,
  non2xx: 0,
  errors: 0,
  statuses: { '200': rps * 10 },
  serverCpuUs: cpuUs,
  redisCpuUs: 0,
  gcSecondsPerMillion: 3,
  scavengesPerThousand: 1,
  youngGenerationBytes: 32 * 2 ** 20,
});

/** Rounds in which the fresh gateway does 1,000 req/s at 50 µs and the others the given multiples of it. */
const rounds = (aged: number[], control: number[]): AgingRound[] =>
  aged.map((a, i) => ({
    order: roundOrder(i),
    aged: figures(1000 * a, 50 / a),
    fresh: figures(1000, 50),
    control: figures(1000 * control[i]!, 50 / control[i]!),
  }));

const verdictFor = (aged: number[], control: number[]) => {
  const measured = rounds(aged, control);
  return verdictOf({ aged: compare(measured, 'aged'), control: compare(measured, 'control') });
};

describe('the order of the gateways in the aging rounds', () => {
  it('puts each gateway first, second and last equally often, and each before each other in half the rounds', () => {
    const orders = [0, 1, 2, 3, 4, 5].map(roundOrder);
    const names: GatewayName[] = ['aged', 'fresh', 'control'];
    for (const name of names)
      for (const position of [0, 1, 2])
        expect(orders.filter((order) => order[position] === name), `${name} at ${position}`).toHaveLength(2);
    for (const a of names)
      for (const b of names.filter((n) => n !== a))
        expect(orders.filter((order) => order.indexOf(a) < order.indexOf(b)), `${a} before ${b}`).toHaveLength(3);
    expect(roundOrder(6)).toEqual(roundOrder(0));
  });
});

describe("the aging mode's verdict", () => {
  it('passes at medians of at least 0.97 and says the aged ratios lie within the A/A band', () => {
    const verdict = verdictFor([0.98, 1.01, 0.97, 1.0, 0.99, 1.02], [0.98, 1.02, 1.0, 0.99, 1.01, 1.0]);
    expect(verdict.passed).toBe(true);
    expect(verdict.throughput.agedMedian).toBeCloseTo(1.0);
    expect(verdict.throughput.noiseBand).toEqual([0.98, 1.02]);
    expect(verdict.throughput.againstNoise).toBe('within');
    expect(verdict.cpuEfficiency.againstNoise).toBe('within');
    expect(verdict.throughput.resolvesTarget).toBe(true);
    expect(verdict.summary).toMatch(/^passed: /);
    expect(verdict.summary).not.toContain('cannot resolve');
  });

  it('passes on the medians but says when two identical gateways differ by more than the margin tested', () => {
    const verdict = verdictFor([1.0, 0.99, 1.02, 0.98, 1.01, 1.0], [0.9, 1.12, 1.0, 0.95, 1.05, 1.0]);
    expect(verdict.passed).toBe(true);
    expect(verdict.throughput.resolvesTarget).toBe(false);
    expect(verdict.summary).toContain('cannot resolve a difference that small');
  });

  it('fails a shortfall below the band as beyond noise, counting the rounds worse than the control', () => {
    const verdict = verdictFor([0.9, 0.91, 0.92, 0.9, 0.93, 0.91], [0.99, 1.01, 1.0, 0.98, 1.02, 1.0]);
    expect(verdict.passed).toBe(false);
    expect(verdict.throughput.meetsTarget).toBe(false);
    expect(verdict.throughput.againstNoise).toBe('below');
    expect(verdict.throughput.roundsWorseThanControl).toBe(6);
    expect(verdict.summary).toMatch(/^failed, beyond the noise/);
  });

  it('fails a shortfall inside a wide band without calling it beyond noise', () => {
    const verdict = verdictFor([0.9, 0.95, 0.96, 0.93, 1.05, 0.94], [0.8, 1.1, 0.9, 1.2, 0.95, 1.0]);
    expect(verdict.passed).toBe(false);
    expect(verdict.throughput.againstNoise).toBe('within');
    expect(verdict.throughput.resolvesTarget).toBe(false);
    expect(verdict.summary).toMatch(/^failed, within the noise/);
  });
});
