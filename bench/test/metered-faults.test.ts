import { describe, expect, it } from 'vitest';
import { judgeUsage } from '../src/faults/metered-invariants.ts';
import type { EvalRecord } from '../src/faults/load.ts';
import type { ReportRecord } from '../src/faults/metered-load.ts';

const LIMIT = 3;

function consume(
  subscriber: string,
  answer: { status: number | null; allowed?: boolean; failure?: string },
): EvalRecord {
  return {
    gateway: 0,
    subscriber,
    victimKey: false,
    route: 'consume',
    status: answer.status,
    failure: answer.failure ?? null,
    metered: answer.status === 200,
    allowed: answer.allowed ?? null,
    startedAt: 0,
    endedAt: 0,
  };
}

function report(subscriber: string, delta: number, acknowledged: boolean): ReportRecord {
  return { subscriber, delta, key: `${subscriber}-${delta}`, batch: null, attempts: [], acknowledged };
}

const allowed = (subscriber: string, n: number) =>
  Array.from({ length: n }, () => consume(subscriber, { status: 200, allowed: true }));
const used = (consumed: number, reported: number) => new Map([['ann', { consumed, reported }]]);

describe("the metered fault rows' verdict (usage lost, over-consumption)", () => {
  it('holds when used is exactly what the answers promised', () => {
    const verdict = judgeUsage(
      [...allowed('ann', 3), consume('ann', { status: 200, allowed: false })],
      [report('ann', 2, true), report('ann', 5, true)],
      used(3, 7),
      ['ann'],
      LIMIT,
    );
    expect(verdict.failures).toEqual([]);
    expect(verdict.findings).toMatchObject({ usageLost: 0, overConsumed: 0 });
  });

  it('counts consumes allowed and reports acknowledged that the final used figure lacks as lost', () => {
    const verdict = judgeUsage(allowed('ann', 3), [report('ann', 4, true)], used(1, 0), ['ann'], LIMIT);
    expect(verdict.findings.usageLost).toBe(2 + 4);
    expect(verdict.failures).toHaveLength(2);
  });

  it('counts consumes allowed beyond the limit as over-consumed', () => {
    const verdict = judgeUsage(allowed('ann', 5), [], used(5, 0), ['ann'], LIMIT);
    expect(verdict.findings.overConsumed).toBe(2);
    expect(verdict.failures.some((f) => f.includes('beyond the limit'))).toBe(true);
    expect(verdict.failures.some((f) => f.includes('beyond the hard limit'))).toBe(true);
  });

  it('fails a deduction by a consume answered 503, but not by one whose answer was lost', () => {
    const refused = [...allowed('ann', 1), consume('ann', { status: 503 })];
    expect(judgeUsage(refused, [], used(2, 0), ['ann'], LIMIT).failures[0]).toContain(
      'a refused or failed consume was deducted',
    );
    const cutOff = [...allowed('ann', 1), consume('ann', { status: null, failure: 'ECONNRESET' })];
    expect(judgeUsage(cutOff, [], used(2, 0), ['ann'], LIMIT).failures).toEqual([]);
  });

  it('fails a report applied twice and a report never acknowledged', () => {
    const verdict = judgeUsage(
      [],
      [report('ann', 2, true), report('ann', 1, false)],
      used(0, 5),
      ['ann'],
      LIMIT,
    );
    expect(verdict.failures.some((f) => f.includes('applied twice'))).toBe(true);
    expect(verdict.failures.some((f) => f.includes('never acknowledged'))).toBe(true);
    expect(verdict.findings.usageLost).toBe(0);
  });
});
