import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  applyArrangementChange,
  SELF_SERVE_ARRANGEMENT,
  type Arrangement,
} from '@ent/common/metering/arrangement';
import type { VerifiedSubscriber } from '../../gateway/src/metering/contract.ts';
import { decodeGateReply, gateArguments, MeteringError } from '../../gateway/src/metering/meter.ts';
import { GRACE_PERIOD_MS, nextPeriodStartMs, periodOf, usageTtlMs } from '@ent/common/metering/period';
import { headerWarn, uncountedUsage, usageRecord, usageWarn } from '@ent/common/metering/usage';

const at = (iso: string) => Date.parse(iso);
const NOW = at('2026-02-10T08:00:00.000Z');
const capped = (evalLimit: number, blocking: boolean): Arrangement => ({
  plan: 'free',
  evalLimit,
  blocking,
  burstPerSecond: 100,
});

describe('periods', () => {
  it.each([
    ['2026-01-31T23:59:59.999Z', '2026-01', '2026-02-01T00:00:00.000Z'],
    ['2026-02-01T00:00:00.000Z', '2026-02', '2026-03-01T00:00:00.000Z'],
    ['2028-02-29T12:00:00.000Z', '2028-02', '2028-03-01T00:00:00.000Z'],
    ['2026-12-31T23:59:59.999Z', '2026-12', '2027-01-01T00:00:00.000Z'],
  ])('%s is in %s, which ends at %s', (now, period, next) => {
    expect(periodOf(at(now))).toBe(period);
    expect(nextPeriodStartMs(at(now))).toBe(at(next));
    expect(usageTtlMs(at(now))).toBeGreaterThan(at(next) - at(now));
  });
});

describe('header warn (X-Svc-Eval-Warn)', () => {
  it.each([
    [10, true, 7, null],
    [10, true, 8, '80'],
    [10, true, 10, '100'],
    [10, true, 11, 'grace'],
    [10, false, 11, '100'],
    [10, false, 1000, '100'],
    [250_000, true, 199_999, null],
    [250_000, true, 200_000, '80'],
    [0, true, 0, '100'],
  ] as const)('limit %i, blocking %s, count %i: %s', (limit, blocking, count, warn) => {
    expect(headerWarn(capped(limit, blocking), count)).toBe(warn);
  });

  it('is null without a cap, and grace once evals stop', () => {
    expect(headerWarn({ evalLimit: null, blocking: true }, 10 ** 9)).toBeNull();
    expect(headerWarn(capped(10, true), 10, true)).toBe('grace');
  });

  it('leaves out an answer not counted after all (a 304), warning included', () => {
    expect(uncountedUsage({ limit: 10, used: 11, warn: 'grace', blocking: true })).toEqual({
      limit: 10,
      used: 10,
      warn: '100',
      blocking: true,
    });
    expect(uncountedUsage({ limit: 10, used: 8, warn: '80', blocking: false })).toMatchObject({ used: 7, warn: null });
    expect(uncountedUsage({ limit: 0, used: 0, warn: '100', blocking: true })).toMatchObject({ used: 0, warn: '100' });
  });
});

describe('usage record', () => {
  const firstOverAt = at('2026-02-03T10:00:00.000Z');

  it.each([
    [
      'under 80%',
      capped(10, true),
      7,
      null,
      NOW,
      { warn: null, allowed: true, first_over_at: null, blocked_at: null },
    ],
    [
      'at 80%',
      capped(10, true),
      8,
      null,
      NOW,
      { warn: '80', allowed: true, first_over_at: null, blocked_at: null },
    ],
    [
      'at the limit, blocking',
      capped(10, true),
      10,
      firstOverAt,
      NOW,
      {
        warn: '100',
        allowed: true,
        first_over_at: '2026-02-03T10:00:00.000Z',
        blocked_at: '2026-02-10T10:00:00.000Z',
      },
    ],
    [
      'over the limit in the grace period',
      capped(10, true),
      15,
      firstOverAt,
      firstOverAt + GRACE_PERIOD_MS - 1,
      { warn: '100', allowed: true, blocked_at: '2026-02-10T10:00:00.000Z' },
    ],
    [
      'past the grace period',
      capped(10, true),
      15,
      firstOverAt,
      firstOverAt + GRACE_PERIOD_MS,
      { warn: 'grace', allowed: false, blocked_at: '2026-02-10T10:00:00.000Z' },
    ],
    [
      'past the grace period, non-blocking',
      capped(10, false),
      15,
      firstOverAt,
      firstOverAt + 20 * 24 * 3600 * 1000,
      {
        warn: '100',
        allowed: true,
        blocking: false,
        first_over_at: '2026-02-03T10:00:00.000Z',
        blocked_at: null,
      },
    ],
    [
      'a stale first_over_at after the limit was raised',
      capped(100, true),
      15,
      firstOverAt,
      firstOverAt + GRACE_PERIOD_MS,
      { warn: null, allowed: true, first_over_at: null, blocked_at: null },
    ],
  ] as const)('%s', (_name, arrangement, count, firstOverAtMs, nowMs, expected) => {
    expect(usageRecord(arrangement, { count, firstOverAtMs }, nowMs)).toMatchObject({
      gated: true,
      reason: null,
      count,
      limit: arrangement.evalLimit,
      plan: 'free',
      ...expected,
    });
  });

  it('reports an unlimited arrangement as not gated and never blocking', () => {
    expect(
      usageRecord(
        { plan: null, evalLimit: null, blocking: true, burstPerSecond: 100 },
        { count: 42, firstOverAtMs: null },
        NOW,
      ),
    ).toEqual({
      gated: false,
      reason: 'unlimited',
      period: '2026-02',
      count: 42,
      limit: null,
      plan: null,
      blocking: false,
      warn: null,
      allowed: true,
      first_over_at: null,
      blocked_at: null,
    });
  });

  it('warns in step with the count and stops only when blocking and past the grace period (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.integer({ min: 0, max: 2_000_000 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 2 * GRACE_PERIOD_MS }),
        (limit, count, blocking, sinceOver) => {
          const arrangement = capped(limit, blocking);
          const over = count >= limit;
          const counters = { count, firstOverAtMs: over ? NOW : null };
          const record = usageRecord(arrangement, counters, NOW + sinceOver);
          const stopped = blocking && over && sinceOver >= GRACE_PERIOD_MS;
          expect(record.allowed).toBe(!stopped);
          expect(record.warn).toBe(usageWarn(arrangement, counters, NOW + sinceOver));
          if (stopped) expect(record.warn).toBe('grace');
          else if (over) expect(record.warn).toBe('100');
          else expect(record.warn).toBe(count * 100 >= limit * 80 ? '80' : null);
          expect(record.blocked_at !== null).toBe(blocking && over);
        },
      ),
    );
  });
});

describe('arrangement changes (entctl org arrangement)', () => {
  const free = SELF_SERVE_ARRANGEMENT;
  it.each([
    ['nothing given keeps everything', free, {}, free],
    ['a limit keeps the plan', free, { evalLimit: 10 }, { ...free, evalLimit: 10 }],
    ['non-blocking', free, { blocking: false }, { ...free, blocking: false }],
    ['burst', free, { burstPerSecond: 5 }, { ...free, burstPerSecond: 5 }],
    ['unlimited clears the plan', free, { unlimited: true }, { ...free, plan: null, evalLimit: null }],
    [
      'unlimited with a plan keeps it',
      free,
      { unlimited: true, plan: 'vip' },
      { ...free, plan: 'vip', evalLimit: null },
    ],
    [
      'a limit on an unlimited org without a plan is individual',
      { ...free, plan: null, evalLimit: null },
      { evalLimit: 1000 },
      { ...free, plan: 'individual', evalLimit: 1000 },
    ],
    ['a plan key alone', free, { plan: 'enterprise' }, { ...free, plan: 'enterprise' }],
  ] as const)('%s', (_name, current, change, expected) => {
    expect(applyArrangementChange(current, change)).toEqual(expected);
  });
});

describe('gate reply mapping', () => {
  // Header: status 0, limit, blocking 1, catalog version 1, auth version 3, count before the batch, stamp 42;
  // then per eval its code, plus 4 × (subscriber version + 1) when the script read that version.
  const reply = (limit: number, countBefore: number, ...evals: number[]): [number, ...number[]] => [0, limit, 1, 1, 3, countBefore, 42, 1, ...evals];
  const read = (code: number, version: number) => code + 4 * (version + 1);
  const now = at('2026-02-10T08:00:00.400Z');
  const evalOf = (subscriberId: string, verified?: VerifiedSubscriber) => ({
    organizationId: 'org',
    subscriberId,
    nowMs: now,
    verified,
  });
  const versions = (subscriber: number) => ({ catalog: 1, subscriber, auth: 3, subscriberStamp: 42 });

  it('maps every code and rejects an unknown one', () => {
    expect(decodeGateReply(reply(10, 7, read(0, 2)), [evalOf('a')])).toEqual([
      { outcome: 'counted', versions: versions(2), usage: { limit: 10, used: 8, warn: '80', blocking: true } },
    ]);
    expect(decodeGateReply(reply(-1, 7, read(0, 2)), [evalOf('a')])[0]).toMatchObject({ outcome: 'counted', usage: null });
    expect(decodeGateReply(reply(10, 8, read(1, 2)), [evalOf('a')])).toEqual([
      { outcome: 'rate_limited', versions: versions(2), retryAfterSeconds: 1 },
    ]);
    expect(decodeGateReply(reply(10, 10, read(2, 2)), [evalOf('a')])).toEqual([
      { outcome: 'blocked', period: '2026-02', versions: versions(2), usage: { limit: 10, used: 10, warn: 'grace', blocking: true } },
    ]);
    expect(() => decodeGateReply(reply(10, 0, 3), [evalOf('a', { verifiedVersion: 1, verifiedStamp: 42 })])).toThrow(MeteringError);
    expect(() => decodeGateReply([3], [evalOf('a')])).toThrow(MeteringError);
  });

  it("counts each eval from the batch's starting count, in order, and reads version 0 as none in the index", () => {
    const batch = reply(100, 4, read(0, 7), read(1, 8), read(2, 0), read(0, 9));
    expect(decodeGateReply(batch, ['a', 'b', 'c', 'd'].map((id) => evalOf(id)))).toEqual([
      { outcome: 'counted', versions: versions(7), usage: { limit: 100, used: 5, warn: null, blocking: true } },
      { outcome: 'rate_limited', versions: versions(8), retryAfterSeconds: 1 },
      { outcome: 'blocked', period: '2026-02', versions: versions(0), usage: { limit: 100, used: 5, warn: 'grace', blocking: true } },
      { outcome: 'counted', versions: versions(9), usage: { limit: 100, used: 6, warn: null, blocking: true } },
    ]);
  });

  it('gives an eval whose version the script did not read the version it was verified at, and refuses one never verified', () => {
    const batch = reply(-1, 0, 0, read(0, 5));
    expect(decodeGateReply(batch, [evalOf('a', { verifiedVersion: 12, verifiedStamp: 42 }), evalOf('b', { verifiedVersion: 3, verifiedStamp: 41 })])).toEqual([
      { outcome: 'counted', versions: versions(12), usage: null },
      { outcome: 'counted', versions: versions(5), usage: null },
    ]);
    expect(() => decodeGateReply(reply(-1, 0, 0), [evalOf('a')])).toThrow(MeteringError);
  });
});

describe('gate arguments', () => {
  const evalOf = (subscriberId: string, nowMs: number, stamp?: number) => ({
    organizationId: 'org',
    subscriberId,
    nowMs,
    verified: stamp === undefined ? undefined : { verifiedVersion: 1, verifiedStamp: stamp },
  });

  it('trusts only evals verified at the stamp last seen, and sends the instants as runs', () => {
    const evals = [evalOf('a', 100, 7), evalOf('b', 100), evalOf('c', 101, 6), evalOf('d', 101, 7), evalOf('e', 100, 7)];
    expect(gateArguments(evals, 7).args).toEqual([7, '10011', 'a', 'b', 'c', 'd', 'e', 2, 100, 2, 101, 1, 100]);
  });

  it('trusts nothing while no stamp is known', () => {
    expect(gateArguments([evalOf('a', 5, 0), evalOf('b', 5, 3)], 0).args).toEqual(['', '00', 'a', 'b', 2, 5]);
  });

  it('says whether any eval carries metered operations (such a call needs a deadline)', () => {
    expect(gateArguments([evalOf('a', 5), evalOf('b', 5)], 0).withMetered).toBe(false);
    expect(gateArguments([evalOf('a', 5), { ...evalOf('b', 5), metered: [] }], 0).withMetered).toBe(true);
  });
});
