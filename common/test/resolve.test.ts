import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { listedEntitlements, resolveAll, resolveFeature, type CheckResult } from '../src/resolve/resolve.ts';
import type { CatalogDoc, Grant, OverrideValue, SubscriberDoc } from '../src/snapshots/documents.ts';
import type { FeatureKind } from '../src/db/database.ts';
import { catalogArbitrary } from '../../test-support/catalog-arbitrary.ts';

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0, 0);

const catalog: CatalogDoc = {
  features: { sso: 'flag', audit: 'flag', seats: 'limit', projects: 'limit', exports: 'flag' },
  plans: {
    plan_free: { archived: false, grants: { seats: { kind: 'limit', limit: 3 }, projects: { kind: 'limit', limit: 1 } } },
    plan_pro: {
      archived: false,
      grants: { sso: { kind: 'flag' }, seats: { kind: 'limit', limit: 25 }, projects: { kind: 'limit', limit: null } },
    },
    plan_addon: { archived: false, grants: { audit: { kind: 'flag' }, seats: { kind: 'limit', limit: 10 } } },
    plan_legacy: { archived: true, grants: { exports: { kind: 'flag' }, seats: { kind: 'limit', limit: 100 } } },
    plan_zero: { archived: false, grants: { seats: { kind: 'limit', limit: 0 } } },
  },
};

const subscriber = (plans: string[], overrides: Record<string, OverrideValue> = {}): SubscriberDoc => ({
  exists: true,
  plans,
  overrides,
});

describe('resolveFeature (table)', () => {
  const cases: [string, SubscriberDoc, string, CheckResult | null][] = [
    ['unknown feature', subscriber(['plan_pro']), 'nope', null],
    ['flag granted by a plan', subscriber(['plan_pro']), 'sso', { feature: 'sso', kind: 'flag', allowed: true, source: 'plan' }],
    ['flag nobody grants', subscriber(['plan_free']), 'sso', { feature: 'sso', kind: 'flag', allowed: false, source: 'none' }],
    ['limit nobody grants', subscriber([]), 'seats', { feature: 'seats', kind: 'limit', limit: 0, source: 'none' }],
    ['limit from one plan', subscriber(['plan_free']), 'seats', { feature: 'seats', kind: 'limit', limit: 3, source: 'plan' }],
    ['limit: the largest of several plans', subscriber(['plan_free', 'plan_addon']), 'seats', { feature: 'seats', kind: 'limit', limit: 10, source: 'plan' }],
    ['limit: unlimited wins over numbers', subscriber(['plan_free', 'plan_pro']), 'projects', { feature: 'projects', kind: 'limit', limit: null, source: 'plan' }],
    ['limit 0 granted is a plan value', subscriber(['plan_zero']), 'seats', { feature: 'seats', kind: 'limit', limit: 0, source: 'plan' }],
    ['flag from any of several plans', subscriber(['plan_free', 'plan_addon']), 'audit', { feature: 'audit', kind: 'flag', allowed: true, source: 'plan' }],
    ['archived plans still apply', subscriber(['plan_legacy']), 'exports', { feature: 'exports', kind: 'flag', allowed: true, source: 'plan' }],
    ['archived plan merged with others', subscriber(['plan_pro', 'plan_legacy']), 'seats', { feature: 'seats', kind: 'limit', limit: 100, source: 'plan' }],
    ['plan missing from the catalog is ignored', subscriber(['plan_gone', 'plan_free']), 'seats', { feature: 'seats', kind: 'limit', limit: 3, source: 'plan' }],
    [
      'override without expiry wins (flag off over a plan grant)',
      subscriber(['plan_pro'], { sso: { kind: 'flag', allowed: false, expiresAt: null } }),
      'sso',
      { feature: 'sso', kind: 'flag', allowed: false, source: 'override' },
    ],
    [
      'override with a future expiry wins',
      subscriber(['plan_free'], { seats: { kind: 'limit', limit: 7, expiresAt: NOW + 1 } }),
      'seats',
      { feature: 'seats', kind: 'limit', limit: 7, source: 'override' },
    ],
    [
      'override is absolute, lower than the plan',
      subscriber(['plan_pro'], { seats: { kind: 'limit', limit: 1, expiresAt: null } }),
      'seats',
      { feature: 'seats', kind: 'limit', limit: 1, source: 'override' },
    ],
    [
      'unlimited override',
      subscriber([], { seats: { kind: 'limit', limit: null, expiresAt: null } }),
      'seats',
      { feature: 'seats', kind: 'limit', limit: null, source: 'override' },
    ],
    [
      'override expiring exactly now has expired',
      subscriber(['plan_free'], { seats: { kind: 'limit', limit: 7, expiresAt: NOW } }),
      'seats',
      { feature: 'seats', kind: 'limit', limit: 3, source: 'plan' },
    ],
    [
      'expired override on a feature nobody grants',
      subscriber([], { sso: { kind: 'flag', allowed: true, expiresAt: NOW - 1 } }),
      'sso',
      { feature: 'sso', kind: 'flag', allowed: false, source: 'none' },
    ],
    [
      'override of the wrong kind is ignored',
      subscriber(['plan_pro'], { sso: { kind: 'limit', limit: 5, expiresAt: null } }),
      'sso',
      { feature: 'sso', kind: 'flag', allowed: true, source: 'plan' },
    ],
  ];
  it.each(cases)('%s', (_name, sub, feature, expected) => {
    expect(resolveFeature(catalog, sub, feature, NOW)).toEqual(expected);
  });

  it('puts the fields in the order of the check result', () => {
    expect(Object.keys(resolveFeature(catalog, subscriber(['plan_pro']), 'seats', NOW)!)).toEqual(['feature', 'kind', 'limit', 'source']);
    expect(Object.keys(resolveFeature(catalog, subscriber(['plan_pro']), 'sso', NOW)!)).toEqual(['feature', 'kind', 'allowed', 'source']);
  });
});

describe('resolveAll and the listing', () => {
  it('lists granted or overridden features by key, and every feature with all', () => {
    const sub = subscriber(['plan_free'], { sso: { kind: 'flag', allowed: false, expiresAt: null } });
    const resolved = resolveAll(catalog, sub, NOW);
    expect(listedEntitlements(resolved, false).map((r) => r.feature)).toEqual(['projects', 'seats', 'sso']);
    expect(listedEntitlements(resolved, true).map((r) => r.feature)).toEqual(['audit', 'exports', 'projects', 'seats', 'sso']);
  });

  it('reports the earliest live expiry as validUntil', () => {
    const sub = subscriber([], {
      sso: { kind: 'flag', allowed: true, expiresAt: NOW + 5000 },
      seats: { kind: 'limit', limit: 1, expiresAt: NOW + 2000 },
      audit: { kind: 'flag', allowed: true, expiresAt: NOW - 10 },
      projects: { kind: 'limit', limit: 1, expiresAt: null },
    });
    expect(resolveAll(catalog, sub, NOW).validUntil).toBe(NOW + 2000);
    expect(resolveAll(catalog, sub, NOW + 2000).validUntil).toBe(NOW + 5000);
    expect(resolveAll(catalog, sub, NOW + 5000).validUntil).toBeNull();
  });

  it('has no entitlements for a subscriber without subscriptions', () => {
    expect(listedEntitlements(resolveAll(catalog, subscriber([]), NOW), false)).toEqual([]);
  });
});

// ---- properties ----

const featureKeys = ['a', 'b', 'c', 'd', 'e', 'f'];
const limitArb = fc.option(fc.nat({ max: 1000 }), { nil: null });
const catalogArb = catalogArbitrary(featureKeys, 1000);

const overrideArb = (kind: FeatureKind): fc.Arbitrary<OverrideValue> => {
  const expiresAt = fc.option(fc.integer({ min: NOW - 5000, max: NOW + 5000 }), { nil: null });
  return kind === 'flag'
    ? fc.record({ kind: fc.constant('flag' as const), allowed: fc.boolean(), expiresAt })
    : fc.record({ kind: fc.constant(kind), limit: limitArb, expiresAt });
};

const worldArb = catalogArb.chain((cat) => {
  const planIds = Object.keys(cat.plans);
  const keys = Object.keys(cat.features);
  return fc.record({
    catalog: fc.constant(cat),
    subscriber: fc.record({
      exists: fc.constant(true),
      plans: planIds.length ? fc.array(fc.constantFrom(...planIds), { maxLength: 4 }) : fc.constant([] as string[]),
      overrides: fc.subarray(keys).chain((chosen) =>
        fc.tuple(...chosen.map((k) => overrideArb(cat.features[k]!))).map((values) => Object.fromEntries(chosen.map((k, i) => [k, values[i]!]))),
      ),
    }),
    now: fc.integer({ min: NOW - 6000, max: NOW + 6000 }),
  });
});

const rank = (r: CheckResult): number =>
  r.kind === 'flag' ? (r.allowed ? 1 : 0) : r.limit === null ? Number.POSITIVE_INFINITY : r.limit;

describe('resolution properties', () => {
  it('a live override always decides, with its own value', () => {
    fc.assert(
      fc.property(worldArb, ({ catalog: cat, subscriber: sub, now }) => {
        for (const [key, override] of Object.entries(sub.overrides)) {
          const result = resolveFeature(cat, sub, key, now)!;
          const live = override.expiresAt === null || override.expiresAt > now;
          expect(result.source === 'override').toBe(live);
          if (live) expect(rank(result)).toBe(rank({ feature: key, source: 'override', ...override } as CheckResult));
        }
      }),
    );
  });

  it('an expired override is the same as no override', () => {
    fc.assert(
      fc.property(worldArb, ({ catalog: cat, subscriber: sub, now }) => {
        const live = Object.fromEntries(Object.entries(sub.overrides).filter(([, o]) => o.expiresAt === null || o.expiresAt > now));
        expect(resolveAll(cat, sub, now).results).toEqual(resolveAll(cat, { ...sub, overrides: live }, now).results);
      }),
    );
  });

  it('the order of subscriptions does not matter', () => {
    fc.assert(
      fc.property(worldArb, ({ catalog: cat, subscriber: sub, now }) => {
        const reversed = { ...sub, plans: [...sub.plans].reverse() };
        expect(resolveAll(cat, reversed, now).results).toEqual(resolveAll(cat, sub, now).results);
      }),
    );
  });

  it('adding a subscription never lowers a plan-sourced value', () => {
    fc.assert(
      fc.property(worldArb, fc.nat(), ({ catalog: cat, subscriber: sub, now }, pick) => {
        const planIds = Object.keys(cat.plans);
        fc.pre(planIds.length > 0);
        const bare = { ...sub, overrides: {} };
        const more = { ...bare, plans: [...bare.plans, planIds[pick % planIds.length]!] };
        const before = resolveAll(cat, bare, now).results;
        const after = resolveAll(cat, more, now).results;
        before.forEach((result, i) => expect(rank(after[i]!)).toBeGreaterThanOrEqual(rank(result)));
      }),
    );
  });

  it('plan values are the flag OR and the limit max (null = unlimited) of the grants', () => {
    fc.assert(
      fc.property(worldArb, ({ catalog: cat, subscriber: sub, now }) => {
        for (const result of resolveAll(cat, { ...sub, overrides: {} }, now).results) {
          const grants = sub.plans.map((id) => cat.plans[id]?.grants[result.feature]).filter((g): g is Grant => !!g);
          expect(result.source).toBe(grants.length ? 'plan' : 'none');
          if (result.kind === 'flag') expect(result.allowed).toBe(grants.length > 0);
          else {
            const limits = grants.map((g) => (g.kind === 'limit' ? g.limit : 0));
            const expected = limits.length === 0 ? 0 : limits.includes(null) ? null : Math.max(...(limits as number[]));
            expect(result.limit).toBe(expected);
          }
        }
      }),
    );
  });

  it('the answer holds until validUntil and changes exactly then', () => {
    fc.assert(
      fc.property(worldArb, ({ catalog: cat, subscriber: sub, now }) => {
        const resolved = resolveAll(cat, sub, now);
        if (resolved.validUntil === null) {
          expect(resolveAll(cat, sub, now + 1_000_000).results).toEqual(resolved.results);
          return;
        }
        expect(resolveAll(cat, sub, resolved.validUntil - 1).results).toEqual(resolved.results);
        expect(resolveAll(cat, sub, resolved.validUntil).results).not.toEqual(resolved.results);
      }),
    );
  });

  it('lists exactly the non-none features, ordered by key', () => {
    fc.assert(
      fc.property(worldArb, ({ catalog: cat, subscriber: sub, now }) => {
        const resolved = resolveAll(cat, sub, now);
        const listed = listedEntitlements(resolved, false);
        expect(listed.every((r) => r.source !== 'none')).toBe(true);
        expect(listed.map((r) => r.feature)).toEqual([...listed.map((r) => r.feature)].sort());
        expect(listedEntitlements(resolved, true).map((r) => r.feature)).toEqual(Object.keys(cat.features).sort());
      }),
    );
  });
});
