import { describe, expect, it } from 'vitest';
import type { GrantBody } from '@ent/contract/plans';
import {
  archivedDetails,
  grantChanges,
  grantsByFeature,
  planCreatedDetails,
  planUpdatedDetails,
  type PlanState,
} from '../../src/features/plans/grant-changes.ts';
import { resolveGrants } from '../../src/features/plans/grants.ts';

describe('audit details (pure)', () => {
  const flag = (feature: string): GrantBody => ({ feature, kind: 'flag' });
  const limit = (feature: string, value: number | null): GrantBody => ({
    feature,
    kind: 'limit',
    limit: value,
  });
  type MeteredFields = Partial<
    Pick<Extract<GrantBody, { kind: 'metered' }>, 'limit' | 'reset' | 'reset_anchor' | 'soft' | 'rollover'>
  >;
  const meteredValue = (fields: MeteredFields = {}) => ({
    kind: 'metered' as const,
    limit: 100,
    reset: 'month' as const,
    reset_anchor: 'calendar' as const,
    soft: false,
    rollover: null,
    ...fields,
  });
  const metered = (feature: string, fields: MeteredFields = {}): GrantBody => ({
    feature,
    ...meteredValue(fields),
  });
  const plan = (overrides: Partial<PlanState> = {}): PlanState => ({
    key: 'pro',
    name: 'Pro',
    kind: 'catalog',
    archived: false,
    grants: [],
    ...overrides,
  });

  it('names each created grant by feature key, without feature', () => {
    expect(
      planCreatedDetails(plan({ grants: [limit('seats', 5), flag('sso'), limit('api', null)] })),
    ).toEqual({
      key: 'pro',
      name: 'Pro',
      kind: 'catalog',
      grants: {
        api: { kind: 'limit', limit: null },
        seats: { kind: 'limit', limit: 5 },
        sso: { kind: 'flag' },
      },
    });
    expect(Object.keys(grantsByFeature([flag('b'), flag('a'), flag('c')]))).toEqual(['a', 'b', 'c']);
  });

  it.each([
    ['nothing', [], [], null],
    ['the same grants in another order', [flag('a'), limit('b', 1)], [limit('b', 1), flag('a')], null],
    ['an added grant', [], [flag('a')], { a: { from: null, to: { kind: 'flag' } } }],
    ['a removed grant', [limit('b', 3)], [], { b: { from: { kind: 'limit', limit: 3 }, to: null } }],
    [
      'a limit raised',
      [limit('b', 3)],
      [limit('b', 4)],
      { b: { from: { kind: 'limit', limit: 3 }, to: { kind: 'limit', limit: 4 } } },
    ],
    [
      'a limit made unlimited',
      [limit('b', 3)],
      [limit('b', null)],
      { b: { from: { kind: 'limit', limit: 3 }, to: { kind: 'limit', limit: null } } },
    ],
    [
      'unlimited made 0',
      [limit('b', null)],
      [limit('b', 0)],
      { b: { from: { kind: 'limit', limit: null }, to: { kind: 'limit', limit: 0 } } },
    ],
    [
      'a metered reset changed',
      [metered('m', { reset: 'month' })],
      [metered('m', { reset: 'week' })],
      { m: { from: meteredValue({ reset: 'month' }), to: meteredValue({ reset: 'week' }) } },
    ],
    [
      'a metered grant made soft',
      [metered('m')],
      [metered('m', { soft: true })],
      { m: { from: meteredValue(), to: meteredValue({ soft: true }) } },
    ],
    [
      'a metered anchor changed',
      [metered('m')],
      [metered('m', { reset_anchor: 'subscription' })],
      { m: { from: meteredValue(), to: meteredValue({ reset_anchor: 'subscription' }) } },
    ],
    ['the same metered grant', [metered('m', { limit: 3 })], [metered('m', { limit: 3 })], null],
    [
      'several changes, only the changed features',
      [flag('a'), limit('b', 1), flag('c')],
      [flag('a'), limit('b', 2), flag('d')],
      {
        b: { from: { kind: 'limit', limit: 1 }, to: { kind: 'limit', limit: 2 } },
        c: { from: { kind: 'flag' }, to: null },
        d: { from: null, to: { kind: 'flag' } },
      },
    ],
  ])('grantChanges: %s', (_, before, after, expected) => {
    expect(grantChanges(before as GrantBody[], after as GrantBody[])).toEqual(expected);
  });

  it('keys grant changes in feature key order, including keys like "constructor"', () => {
    const changes = grantChanges([flag('z'), flag('constructor')], [flag('a')])!;
    expect(Object.keys(changes)).toEqual(['a', 'constructor', 'z']);
    expect(changes.constructor).toEqual({ from: { kind: 'flag' }, to: null });
  });

  it('planUpdatedDetails: name as a change, grants per feature, null when nothing changed', () => {
    expect(planUpdatedDetails(plan(), plan())).toBeNull();
    expect(planUpdatedDetails(plan({ grants: [flag('a')] }), plan({ grants: [flag('a')] }))).toBeNull();
    expect(planUpdatedDetails(plan(), plan({ name: 'Pro 2' }))).toEqual({
      name: { from: 'Pro', to: 'Pro 2' },
    });
    expect(planUpdatedDetails(plan({ grants: [flag('a')] }), plan({ name: 'P', grants: [] }))).toEqual({
      name: { from: 'Pro', to: 'P' },
      grants: { a: { from: { kind: 'flag' }, to: null } },
    });
  });

  it('archivedDetails: a change, or null when already in that state', () => {
    expect(archivedDetails(false, true)).toEqual({ archived: { from: false, to: true } });
    expect(archivedDetails(true, false)).toEqual({ archived: { from: true, to: false } });
    expect(archivedDetails(true, true)).toBeNull();
    expect(archivedDetails(false, false)).toBeNull();
  });
});

describe('resolveGrants (pure)', () => {
  const catalog = [
    { id: 'feat_1', key: 'sso', kind: 'flag' as const },
    { id: 'feat_2', key: 'seats', kind: 'limit' as const },
    { id: 'feat_3', key: 'calls', kind: 'metered' as const },
  ];
  const NOT_METERED = { reset: null, resetAnchor: null, soft: null, rolloverMax: null };

  it("fills a metered grant's defaults and keeps what it names", () => {
    expect(resolveGrants([{ feature: 'calls', kind: 'metered', limit: 10 }], catalog)).toEqual([
      {
        featureId: 'feat_3',
        feature: 'calls',
        kind: 'metered',
        limit: 10,
        reset: 'month',
        resetAnchor: 'calendar',
        soft: false,
        rolloverMax: null,
      },
    ]);
    expect(
      resolveGrants(
        [
          {
            feature: 'calls',
            kind: 'metered',
            limit: null,
            reset: 'never',
            reset_anchor: 'subscription',
            soft: true,
          },
        ],
        catalog,
      ),
    ).toEqual([
      {
        featureId: 'feat_3',
        feature: 'calls',
        kind: 'metered',
        limit: null,
        reset: 'never',
        resetAnchor: 'subscription',
        soft: true,
        rolloverMax: null,
      },
    ]);
  });

  it('resolves valid grants to feature ids, keeping request order', () => {
    expect(
      resolveGrants(
        [
          { feature: 'sso', kind: 'flag' },
          { feature: 'seats', kind: 'limit', limit: null },
        ],
        catalog,
      ),
    ).toEqual([
      { featureId: 'feat_1', feature: 'sso', kind: 'flag', limit: null, ...NOT_METERED },
      { featureId: 'feat_2', feature: 'seats', kind: 'limit', limit: null, ...NOT_METERED },
    ]);
  });

  it('names the first grant that breaks a rule', () => {
    const fieldOf = (grants: Parameters<typeof resolveGrants>[0]) => {
      try {
        resolveGrants(grants, catalog);
        return null;
      } catch (error) {
        return (error as { details?: { field?: string } }).details?.field;
      }
    };
    expect(
      fieldOf([
        { feature: 'sso', kind: 'flag' },
        { feature: 'sso', kind: 'flag', limit: 1 },
      ]),
    ).toBe('grants.1.feature');
    expect(
      fieldOf([
        { feature: 'nope', kind: 'flag' },
        { feature: 'sso', kind: 'limit' },
      ]),
    ).toBe('grants.0.feature');
    expect(fieldOf([{ feature: 'seats', kind: 'flag' }])).toBe('grants.0.kind');
    expect(fieldOf([{ feature: 'sso', kind: 'flag', limit: null }])).toBe('grants.0.limit');
    expect(fieldOf([{ feature: 'seats', kind: 'limit' }])).toBe('grants.0.limit');
    expect(fieldOf([{ feature: 'calls', kind: 'metered' }])).toBe('grants.0.limit');
    expect(fieldOf([{ feature: 'seats', kind: 'limit', limit: 1, soft: true }])).toBe('grants.0.soft');
    expect(fieldOf([{ feature: 'sso', kind: 'flag', reset_anchor: 'calendar' }])).toBe(
      'grants.0.reset_anchor',
    );
    expect(fieldOf([{ feature: 'calls', kind: 'limit', limit: 1 }])).toBe('grants.0.kind');
    expect(fieldOf([])).toBeNull();
  });
});
