import { describe, expect, it } from 'vitest';
import type { MeteredUsage } from '../src/api/types.ts';
import { formatTime } from '../src/components/format.ts';
import { meteredTermsText } from '../src/components/metered-terms.ts';
import { describe as describeValue } from '../src/pages/audit/changes.ts';
import { percentText, periodText, usageMeterOf } from '../src/pages/subscribers/usage-meter.ts';

const usage = (fields: Partial<MeteredUsage>): MeteredUsage => ({
  feature: 'api_calls',
  kind: 'metered',
  limit: 1000,
  used: 0,
  remaining: 1000,
  allowed: true,
  period_start: '2026-11-01T00:00:00.000Z',
  resets_at: '2026-12-01T00:00:00.000Z',
  source: 'plan',
  credits: [],
  ...fields,
});

describe('a metered grant in words', () => {
  it('names the limit, the period, a subscription anchor and softness', () => {
    const terms = { limit: 1000, reset: 'month', reset_anchor: 'calendar', soft: true } as const;
    expect(meteredTermsText(terms)).toMatch(/^1\D?000 \/ month, soft$/);
    expect(meteredTermsText({ ...terms, soft: false, limit: null, reset: 'day' })).toBe('unlimited / day');
    expect(meteredTermsText({ ...terms, soft: false, limit: 500, reset_anchor: 'subscription' })).toBe(
      '500 / month from subscription start',
    );
    // A period that never ends has no anchor worth naming.
    expect(meteredTermsText({ ...terms, limit: 20, reset: 'never', reset_anchor: 'subscription' })).toBe(
      '20, never resets, soft',
    );
  });

  it("is written so in the audit log's grant changes", () => {
    const grant = { kind: 'metered', limit: 100, reset: 'week', reset_anchor: 'calendar', soft: false };
    expect(describeValue(grant)).toBe('metered 100 / week');
    // Not a metered grant's shape: written as it is.
    expect(describeValue({ kind: 'metered', limit: 100 })).toBe('{"kind":"metered","limit":100}');
  });
});

describe("a metered feature's bar", () => {
  it('fills with the share used, turning "near" at 80 % and "reached" at the limit', () => {
    expect(usageMeterOf(usage({ used: 250 }))).toEqual({
      percent: 25,
      withinWidth: 25,
      overageWidth: 0,
      overage: 0,
      state: 'within',
    });
    expect(usageMeterOf(usage({ used: 800 })).state).toBe('near');
    expect(usageMeterOf(usage({ used: 1000 }))).toMatchObject({ withinWidth: 100, state: 'reached' });
    // Reports are never refused: a hard limit can be passed; the bar stays full and shows no overage.
    expect(usageMeterOf(usage({ used: 1500 }))).toMatchObject({
      percent: 150,
      withinWidth: 100,
      overageWidth: 0,
      state: 'reached',
    });
  });

  it('splits a soft limit passed into the limit and the overage beyond it', () => {
    const meter = usageMeterOf(usage({ used: 1250, overage: 250, remaining: 0 }));
    expect(meter).toEqual({
      percent: 125,
      withinWidth: 80,
      overageWidth: 20,
      overage: 250,
      state: 'overage',
    });
    expect(usageMeterOf(usage({ used: 10, overage: 0 })).state).toBe('within');
  });

  it('shows use past the allowance that live credits cover as on credits, not as a limit reached', () => {
    const onCredits = usage({
      used: 1250,
      remaining: 250,
      credits: [{ credit_id: 'cr_1', remaining: 250, expires_at: null }],
    });
    expect(usageMeterOf(onCredits)).toEqual({
      percent: 125,
      withinWidth: 100,
      overageWidth: 0,
      overage: 0,
      state: 'credits',
    });
    // Credits spent out: the limit is reached again.
    expect(usageMeterOf(usage({ used: 1500, remaining: 0, credits: [] })).state).toBe('reached');
    // A soft limit whose overage credits covered answers overage 0: on credits too.
    expect(usageMeterOf({ ...onCredits, overage: 0 }).state).toBe('credits');
  });

  it('has no share for an unlimited feature or a limit of 0', () => {
    expect(usageMeterOf(usage({ limit: null, remaining: null, used: 42 }))).toEqual({
      percent: null,
      withinWidth: 0,
      overageWidth: 0,
      overage: 0,
      state: 'unlimited',
    });
    expect(usageMeterOf(usage({ limit: 0, remaining: 0, used: 0, source: 'none' }))).toMatchObject({
      percent: null,
      withinWidth: 0,
      state: 'reached',
    });
    expect(usageMeterOf(usage({ limit: 0, remaining: 0, used: 3 })).withinWidth).toBe(100);
  });

  it('rounds the share down, so a limit not yet reached never reads 100 %', () => {
    expect(percentText(99.95)).toBe('99%');
    expect(percentText(100)).toBe('100%');
    expect(percentText(7.56)).toBe('7.5%');
    expect(percentText(0.04)).toBe('<0.1%');
    expect(percentText(0)).toBe('0%');
  });

  it('names the zone of every time it writes', () => {
    const instant = '2026-11-30T16:00:00.000Z';
    const zone = new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' })
      .formatToParts(new Date(instant))
      .find((part) => part.type === 'timeZoneName')!.value;
    expect(formatTime(instant).endsWith(zone)).toBe(true);
    expect(formatTime(instant)).toMatch(/2026/);
  });

  it('says when the period started and resets, or that it never does', () => {
    expect(periodText(usage({}))).toMatch(/^Since .*2026.*; resets on .*2026/);
    const anchored = periodText(usage({ resets_at: null, period_start: '2026-03-04T05:06:07.000Z' }));
    expect(anchored).toMatch(/^Since .*2026.*; never resets$/);
    // A calendar period for "never" starts at the epoch: no start worth naming.
    expect(periodText(usage({ resets_at: null, period_start: '1970-01-01T00:00:00.000Z' }))).toBe(
      'Never resets',
    );
  });
});
