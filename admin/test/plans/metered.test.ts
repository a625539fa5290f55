import { describe, expect, it } from 'vitest';
import { planSuite, type Json } from './fixtures.ts';

const suite = planSuite();

/** The plan tests' features plus two metered ones (DESIGN.md §5). */
const FEATURES = [
  ['sso', 'flag'],
  ['seats', 'limit'],
  ['api-calls', 'metered'],
  ['exports', 'metered'],
] as const;

const meteredWorld = () => suite.world({ features: FEATURES });

const plan = (grants: Json[]): Json => ({ key: 'usage', name: 'Usage', kind: 'catalog', grants });

describe('metered grants', () => {
  it('creates a metered grant with its defaults filled, and answers and audits every field', async () => {
    const { createPlan, inject, lastWrite } = await meteredWorld();
    const res = await createPlan(
      plan([
        { feature: 'api-calls', kind: 'metered', limit: 1000 },
        {
          feature: 'exports',
          kind: 'metered',
          limit: null,
          reset: 'day',
          reset_anchor: 'subscription',
          soft: true,
        },
        { feature: 'seats', kind: 'limit', limit: 5 },
      ]),
    );
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.grants).toEqual([
      {
        feature: 'api-calls',
        kind: 'metered',
        limit: 1000,
        reset: 'month',
        reset_anchor: 'calendar',
        soft: false,
        rollover: null,
      },
      {
        feature: 'exports',
        kind: 'metered',
        limit: null,
        reset: 'day',
        reset_anchor: 'subscription',
        soft: true,
        rollover: null,
      },
      { feature: 'seats', kind: 'limit', limit: 5 },
    ]);
    expect((await inject('GET', '/org/plans/usage')).json().grants).toEqual(body.grants);
    expect((await inject('GET', '/org/plans')).json().plans[0].grants).toEqual(body.grants);
    expect(lastWrite()).toMatchObject({
      details: {
        grants: {
          'api-calls': {
            kind: 'metered',
            limit: 1000,
            reset: 'month',
            reset_anchor: 'calendar',
            soft: false,
            rollover: null,
          },
          exports: {
            kind: 'metered',
            limit: null,
            reset: 'day',
            reset_anchor: 'subscription',
            soft: true,
            rollover: null,
          },
          seats: { kind: 'limit', limit: 5 },
        },
      },
      events: [{ type: 'plan.created', data: body }],
    });
  });

  it('stores the metered columns, and nothing of them on the other kinds', async () => {
    const { ctx, createPlan, planId } = await meteredWorld();
    await createPlan(
      plan([
        { feature: 'api-calls', kind: 'metered', limit: 0, reset: 'never' },
        { feature: 'seats', kind: 'limit', limit: 5 },
        { feature: 'sso', kind: 'flag' },
      ]),
    );
    const rows = await ctx.db
      .selectFrom('plan_grants')
      .select(['feature_kind', 'limit_value', 'reset', 'reset_anchor', 'soft'])
      .where('plan_id', '=', await planId('usage'))
      .orderBy('feature_kind')
      .execute();
    expect(rows).toEqual([
      { feature_kind: 'flag', limit_value: null, reset: null, reset_anchor: null, soft: null },
      { feature_kind: 'limit', limit_value: 5, reset: null, reset_anchor: null, soft: null },
      { feature_kind: 'metered', limit_value: 0, reset: 'never', reset_anchor: 'calendar', soft: false },
    ]);
  });

  it.each([
    [
      'a metered grant without limit',
      [{ feature: 'api-calls', kind: 'metered', reset: 'day' }],
      'grants.0.limit',
    ],
    [
      'reset on a limit grant',
      [
        { feature: 'api-calls', kind: 'metered', limit: 1 },
        { feature: 'seats', kind: 'limit', limit: 5, reset: 'month' },
      ],
      'grants.1.reset',
    ],
    [
      'reset_anchor on a limit grant',
      [{ feature: 'seats', kind: 'limit', limit: 5, reset_anchor: 'calendar' }],
      'grants.0.reset_anchor',
    ],
    ['soft on a limit grant', [{ feature: 'seats', kind: 'limit', limit: 5, soft: false }], 'grants.0.soft'],
    ['reset on a flag grant', [{ feature: 'sso', kind: 'flag', reset: 'day' }], 'grants.0.reset'],
    ['soft on a flag grant', [{ feature: 'sso', kind: 'flag', soft: true }], 'grants.0.soft'],
    [
      'a limit grant of a metered feature',
      [{ feature: 'api-calls', kind: 'limit', limit: 5 }],
      'grants.0.kind',
    ],
    [
      'a metered grant of a limit feature',
      [{ feature: 'seats', kind: 'metered', limit: 5 }],
      'grants.0.kind',
    ],
    [
      'an unknown reset',
      [{ feature: 'api-calls', kind: 'metered', limit: 5, reset: 'hour' }],
      'grants.0.reset',
    ],
    [
      'an unknown reset_anchor',
      [{ feature: 'api-calls', kind: 'metered', limit: 5, reset_anchor: 'billing' }],
      'grants.0.reset_anchor',
    ],
    [
      'a soft that is not a boolean',
      [{ feature: 'api-calls', kind: 'metered', limit: 5, soft: 'yes' }],
      'grants.0.soft',
    ],
    [
      'rollover on a limit grant',
      [{ feature: 'seats', kind: 'limit', limit: 5, rollover: { max: 5 } }],
      'grants.0.rollover',
    ],
    ['rollover on a flag grant', [{ feature: 'sso', kind: 'flag', rollover: null }], 'grants.0.rollover'],
    [
      'a rollover max of 0',
      [{ feature: 'api-calls', kind: 'metered', limit: 5, rollover: { max: 0 } }],
      'grants.0.rollover.max',
    ],
    [
      'a rollover without max',
      [{ feature: 'api-calls', kind: 'metered', limit: 5, rollover: {} }],
      'grants.0.rollover.max',
    ],
    ['a negative limit', [{ feature: 'api-calls', kind: 'metered', limit: -1 }], 'grants.0.limit'],
    ['a fractional limit', [{ feature: 'api-calls', kind: 'metered', limit: 2.5 }], 'grants.0.limit'],
  ])('refuses %s with 422 VALIDATION_ERROR on %s, on create and update', async (_, grants, field) => {
    const { createPlan, inject, catalogVersion } = await meteredWorld();
    expect((await createPlan({ key: 'base', name: 'Base', kind: 'catalog' })).statusCode).toBe(201);
    const version = await catalogVersion();
    const created = await createPlan(plan(grants));
    expect(created.statusCode).toBe(422);
    expect(created.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
    const updated = await inject('PATCH', '/org/plans/base', { grants });
    expect(updated.statusCode).toBe(422);
    expect(updated.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
    expect((await inject('GET', '/org/plans/base')).json().grants).toEqual([]);
    expect(await catalogVersion()).toBe(version);
  });

  it('names the misplaced field and the grant in the message', async () => {
    const { createPlan } = await meteredWorld();
    const res = await createPlan(plan([{ feature: 'seats', kind: 'limit', limit: 5, reset: 'week' }]));
    expect(res.json().error).toMatchObject({
      message: 'reset is for metered grants only; remove it from the limit grant of "seats".',
      details: { field: 'grants.0.reset', value: 'week' },
    });
    const missing = await createPlan(plan([{ feature: 'api-calls', kind: 'metered' }]));
    expect(missing.json().error.message).toBe(
      'A metered grant needs limit (an integer >= 0, or null for unlimited) for "api-calls".',
    );
  });

  it.each([
    ['the limit', { limit: 500 }, { limit: 500 }],
    ['the reset', { reset: 'week' }, { reset: 'week' }],
    ['the anchor', { reset_anchor: 'subscription' }, { reset_anchor: 'subscription' }],
    ['the soft flag', { soft: true }, { soft: true }],
    ['the rollover', { rollover: { max: 200 } }, { rollover: { max: 200 } }],
  ])(
    'audits a change of %s as the whole grant from and to, and raises plan.updated',
    async (_, change, changed) => {
      const { createPlan, inject, lastWrite, catalogVersion } = await meteredWorld();
      await createPlan(plan([{ feature: 'api-calls', kind: 'metered', limit: 1000 }]));
      const version = await catalogVersion();
      const res = await inject('PATCH', '/org/plans/usage', {
        grants: [{ feature: 'api-calls', kind: 'metered', limit: 1000, ...change }],
      });
      expect(res.statusCode).toBe(200);
      const before = {
        kind: 'metered',
        limit: 1000,
        reset: 'month',
        reset_anchor: 'calendar',
        soft: false,
        rollover: null,
      };
      expect(res.json().grants).toEqual([{ feature: 'api-calls', ...before, ...changed }]);
      expect(lastWrite()).toMatchObject({
        details: { grants: { 'api-calls': { from: before, to: { ...before, ...changed } } } },
        events: [{ type: 'plan.updated', data: res.json() }],
      });
      expect(await catalogVersion()).toBe(version + 1);
    },
  );

  it('treats the defaults spelled out as the same grant: nothing changes', async () => {
    const { createPlan, inject, lastWrite, catalogVersion } = await meteredWorld();
    await createPlan(plan([{ feature: 'api-calls', kind: 'metered', limit: 1000 }]));
    const version = await catalogVersion();
    const res = await inject('PATCH', '/org/plans/usage', {
      grants: [
        {
          feature: 'api-calls',
          kind: 'metered',
          limit: 1000,
          reset: 'month',
          reset_anchor: 'calendar',
          soft: false,
        },
      ],
    });
    expect(res.statusCode).toBe(200);
    expect(lastWrite()).toMatchObject({ details: null, events: [] });
    expect(await catalogVersion()).toBe(version);
  });

  it('audits a metered grant added and removed, and names it in plan.deleted', async () => {
    const { createPlan, inject, lastWrite } = await meteredWorld();
    await createPlan(plan([{ feature: 'seats', kind: 'limit', limit: 5 }]));
    const added = await inject('PATCH', '/org/plans/usage', {
      grants: [{ feature: 'exports', kind: 'metered', limit: 3, reset: 'year', soft: true }],
    });
    const metered = {
      kind: 'metered',
      limit: 3,
      reset: 'year',
      reset_anchor: 'calendar',
      soft: true,
      rollover: null,
    };
    expect(lastWrite().details).toEqual({
      grants: {
        exports: { from: null, to: metered },
        seats: { from: { kind: 'limit', limit: 5 }, to: null },
      },
    });
    const removed = await inject('PATCH', '/org/plans/usage', { grants: [] });
    expect(lastWrite().details).toEqual({ grants: { exports: { from: metered, to: null } } });
    await inject('PATCH', '/org/plans/usage', { grants: added.json().grants });
    expect(removed.json().grants).toEqual([]);
    const deleted = await inject('DELETE', '/org/plans/usage');
    expect(deleted.statusCode).toBe(204);
    expect(lastWrite().events).toEqual([
      {
        type: 'plan.deleted',
        data: expect.objectContaining({ grants: [{ feature: 'exports', ...metered }] }),
      },
    ]);
  });
});
