import { describe, expect, it } from 'vitest';
import { planSuite, STANDARD_PLANS } from './fixtures.ts';

const suite = planSuite();

describe('POST /org/plans', () => {
  it('creates a plan with 201 and returns grants ordered by feature key', async () => {
    const { createPlan, catalogVersion, lastWrite } = await suite.world();
    const before = await catalogVersion();
    // pro: sso, seats 10 and unlimited api-calls, given in that order (not sorted).
    const res = await createPlan(STANDARD_PLANS[0]!);
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      key: 'pro',
      name: 'Pro',
      kind: 'catalog',
      archived: false,
      grants: [
        { feature: 'api-calls', kind: 'limit', limit: null },
        { feature: 'seats', kind: 'limit', limit: 10 },
        { feature: 'sso', kind: 'flag' },
      ],
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: expect.stringMatching(/Z$/),
    });
    expect(await catalogVersion()).toBe(before + 1);
    expect(lastWrite()).toMatchObject({
      catalogChanged: true,
      details: {
        key: 'pro',
        name: 'Pro',
        kind: 'catalog',
        grants: {
          'api-calls': { kind: 'limit', limit: null },
          seats: { kind: 'limit', limit: 10 },
          sso: { kind: 'flag' },
        },
      },
      events: [{ type: 'plan.created', data: body }],
    });
  });

  it('defaults grants to [] and accepts a limit of 0', async () => {
    const { createPlan, lastWrite } = await suite.world();
    const empty = await createPlan({ key: 'free', name: 'Free', kind: 'catalog' });
    expect(empty.statusCode).toBe(201);
    expect(empty.json().grants).toEqual([]);
    expect(lastWrite().details).toEqual({ key: 'free', name: 'Free', kind: 'catalog', grants: {} });
    const zero = await createPlan({
      key: 'acme_custom',
      name: 'Acme deal',
      kind: 'custom',
      grants: [{ feature: 'seats', kind: 'limit', limit: 0 }],
    });
    expect(zero.statusCode).toBe(201);
    expect(zero.json()).toMatchObject({
      kind: 'custom',
      grants: [{ feature: 'seats', kind: 'limit', limit: 0 }],
    });
  });

  it('refuses an existing key with 409 CONFLICT and changes nothing', async () => {
    const { createPlan, catalogVersion, inject } = await suite.world({ plans: true });
    const before = await catalogVersion();
    const res = await createPlan({ key: 'pro', name: 'Pro again', kind: 'custom' });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({
      code: 'CONFLICT',
      type: 'invalid_request_error',
      details: { field: 'key', value: 'pro' },
    });
    expect((await inject('GET', '/org/plans/pro')).json().name).toBe('Pro');
    expect(await catalogVersion()).toBe(before);
  });

  it.each([
    [{ name: 'x', kind: 'catalog' }, 'key'],
    [{ key: 'Pro', name: 'x', kind: 'catalog' }, 'key'],
    [{ key: 'a.b', name: 'x', kind: 'catalog' }, 'key'],
    [{ key: 'k'.repeat(65), name: 'x', kind: 'catalog' }, 'key'],
    [{ key: '', name: 'x', kind: 'catalog' }, 'key'],
    [{ key: 'ok', kind: 'catalog' }, 'name'],
    [{ key: 'ok', name: '', kind: 'catalog' }, 'name'],
    [{ key: 'ok', name: 'n'.repeat(256), kind: 'catalog' }, 'name'],
    [{ key: 'ok', name: 'x' }, 'kind'],
    [{ key: 'ok', name: 'x', kind: 'premium' }, 'kind'],
    [{ key: 'ok', name: 'x', kind: 'catalog', archived: true }, 'archived'],
    [{ key: 'ok', name: 'x', kind: 'catalog', grants: {} }, 'grants'],
    [{ key: 'ok', name: 'x', kind: 'catalog', grants: [{ kind: 'flag' }] }, 'grants.0.feature'],
    [
      { key: 'ok', name: 'x', kind: 'catalog', grants: [{ feature: 'sso', kind: 'toggle' }] },
      'grants.0.kind',
    ],
    [
      { key: 'ok', name: 'x', kind: 'catalog', grants: [{ feature: 'sso', kind: 'flag', allowed: true }] },
      'grants.0.allowed',
    ],
    [
      { key: 'ok', name: 'x', kind: 'catalog', grants: [{ feature: 'seats', kind: 'limit', limit: -1 }] },
      'grants.0.limit',
    ],
    [
      { key: 'ok', name: 'x', kind: 'catalog', grants: [{ feature: 'seats', kind: 'limit', limit: 1.5 }] },
      'grants.0.limit',
    ],
    [
      { key: 'ok', name: 'x', kind: 'catalog', grants: [{ feature: 'seats', kind: 'limit', limit: '5' }] },
      'grants.0.limit',
    ],
  ])('refuses %j with 422 VALIDATION_ERROR on %s', async (payload, field) => {
    const { createPlan } = await suite.world();
    const res = await createPlan(payload);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
  });

  it.each([
    [
      'an unknown feature key',
      [
        { feature: 'sso', kind: 'flag' },
        { feature: 'nope', kind: 'flag' },
      ],
      'grants.1.feature',
    ],
    ['a grant kind other than the feature kind', [{ feature: 'seats', kind: 'flag' }], 'grants.0.kind'],
    ['a flag grant with a limit', [{ feature: 'sso', kind: 'flag', limit: 3 }], 'grants.0.limit'],
    ['a flag grant with a null limit', [{ feature: 'sso', kind: 'flag', limit: null }], 'grants.0.limit'],
    [
      'a limit grant without limit',
      [
        { feature: 'audit-log', kind: 'flag' },
        { feature: 'seats', kind: 'limit' },
      ],
      'grants.1.limit',
    ],
    [
      'a feature listed twice',
      [
        { feature: 'sso', kind: 'flag' },
        { feature: 'seats', kind: 'limit', limit: 1 },
        { feature: 'sso', kind: 'flag' },
      ],
      'grants.2.feature',
    ],
  ])('refuses %s with 422 naming the grant, and creates nothing', async (_, grants, field) => {
    const { createPlan, inject } = await suite.world();
    const res = await createPlan({ key: 'invalid', name: 'Invalid', kind: 'catalog', grants });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
    expect((await inject('GET', '/org/plans/invalid')).statusCode).toBe(404);
  });

  it('answers malformed JSON with 422, not 500', async () => {
    const { org } = await suite.world();
    const res = await suite.context().app.inject({
      method: 'POST',
      url: '/org/plans',
      headers: { ...org.headers, 'content-type': 'application/json' },
      payload: '{"key": "x", ',
    });
    expect(res.statusCode).toBe(422);
  });
});
