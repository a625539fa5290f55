import { describe, expect, it } from 'vitest';
import { planSuite, tick } from './fixtures.ts';

const suite = planSuite();

describe('PATCH /org/plans/{key}', () => {
  it('changes the name and keeps the grants', async () => {
    const { inject, lastWrite } = await suite.world({ plans: true });
    const before = (await inject('GET', '/org/plans/pro')).json();
    await tick();
    const res = await inject('PATCH', '/org/plans/pro', { name: 'Professional' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ key: 'pro', name: 'Professional', kind: 'catalog', grants: before.grants });
    expect(body.updated_at > before.updated_at).toBe(true);
    expect(body.created_at).toBe(before.created_at);
    expect(lastWrite()).toMatchObject({
      details: { name: { from: 'Pro', to: 'Professional' } },
      catalogChanged: true,
      events: [{ type: 'plan.updated', data: body }],
    });
  });

  it('replaces the whole grant list and reports a change per feature', async () => {
    const { inject, catalogVersion, lastWrite } = await suite.world({ plans: true });
    const version = await catalogVersion();
    const res = await inject('PATCH', '/org/plans/pro', {
      grants: [
        { feature: 'seats', kind: 'limit', limit: 25 },
        { feature: 'sso', kind: 'flag' },
        { feature: 'audit-log', kind: 'flag' },
      ],
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().grants).toEqual([
      { feature: 'audit-log', kind: 'flag' },
      { feature: 'seats', kind: 'limit', limit: 25 },
      { feature: 'sso', kind: 'flag' },
    ]);
    expect((await inject('GET', '/org/plans/pro')).json().grants).toEqual(res.json().grants);
    expect(lastWrite().details).toEqual({
      grants: {
        'api-calls': { from: { kind: 'limit', limit: null }, to: null },
        'audit-log': { from: null, to: { kind: 'flag' } },
        seats: { from: { kind: 'limit', limit: 10 }, to: { kind: 'limit', limit: 25 } },
      },
    });
    expect(await catalogVersion()).toBe(version + 1);
  });

  it('empties the grant list with grants: []', async () => {
    const { inject, createPlan, lastWrite } = await suite.world();
    await createPlan({
      key: 'trial',
      name: 'Trial',
      kind: 'catalog',
      grants: [{ feature: 'sso', kind: 'flag' }],
    });
    const res = await inject('PATCH', '/org/plans/trial', { grants: [] });
    expect(res.statusCode).toBe(200);
    expect(res.json().grants).toEqual([]);
    expect(lastWrite().details).toEqual({ grants: { sso: { from: { kind: 'flag' }, to: null } } });
  });

  it('changes nothing, bumps nothing and reports null details when the values are the same', async () => {
    const { inject, catalogVersion, lastWrite, writeCount } = await suite.world({ plans: true });
    const before = (await inject('GET', '/org/plans/pro')).json();
    const version = await catalogVersion();
    const count = writeCount();
    const res = await inject('PATCH', '/org/plans/pro', {
      name: before.name,
      grants: [...before.grants].reverse(),
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(before);
    expect(await catalogVersion()).toBe(version);
    expect(writeCount()).toBe(count + 1);
    // No change and no event, but the catalog is published again (an identical write before it may not have been).
    expect(lastWrite()).toMatchObject({ details: null, catalogChanged: true, events: [] });
    expect((await inject('PATCH', '/org/plans/pro', {})).json()).toEqual(before);
  });

  it.each([
    [{ key: 'renamed' }, 'key'],
    [{ kind: 'custom' }, 'kind'],
    [{ kind: 'catalog' }, 'kind'],
    [{ name: '' }, 'name'],
    [{ grants: [{ feature: 'nope', kind: 'flag' }] }, 'grants.0.feature'],
    [{ grants: [{ feature: 'sso', kind: 'limit', limit: 1 }] }, 'grants.0.kind'],
    [
      {
        grants: [
          { feature: 'sso', kind: 'flag' },
          { feature: 'sso', kind: 'flag' },
        ],
      },
      'grants.1.feature',
    ],
  ])('refuses %j with 422 on %s and leaves the plan as it was', async (payload, field) => {
    const { inject } = await suite.world({ plans: true });
    const before = (await inject('GET', '/org/plans/pro')).json();
    const res = await inject('PATCH', '/org/plans/pro', { name: 'Changed', ...payload });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
    expect((await inject('GET', '/org/plans/pro')).json()).toEqual(before);
  });

  it('takes no body: none or {} archives, a field or a non-object is 422 and changes nothing', async () => {
    const { inject } = await suite.world({ plans: true });
    expect((await inject('POST', '/org/plans/free/archive', {})).statusCode).toBe(200);
    const kept = await inject('POST', '/org/plans/free/unarchive', { archived: true });
    expect(kept.statusCode).toBe(422);
    expect(kept.json().error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'archived', location: 'body' },
    });
    const listed = await inject('POST', '/org/plans/free/unarchive', ['x']);
    expect(listed.statusCode).toBe(422);
    expect(listed.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'body' } });
    expect((await inject('GET', '/org/plans/free')).json().archived).toBe(true);
  });

  it('answers 404 for an unknown plan', async () => {
    const { inject } = await suite.world();
    expect((await inject('PATCH', '/org/plans/nope', { name: 'x' })).statusCode).toBe(404);
  });
});

describe('archive and unarchive', () => {
  it('archives, idempotently, and answers 200 with the plan', async () => {
    const { inject, catalogVersion, lastWrite } = await suite.world({ plans: true });
    const version = await catalogVersion();
    const res = await inject('POST', '/org/plans/free/archive');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ key: 'free', archived: true, grants: [] });
    expect(lastWrite()).toMatchObject({
      details: { archived: { from: false, to: true } },
      catalogChanged: true,
      events: [{ type: 'plan.archived', data: body }],
    });
    expect(await catalogVersion()).toBe(version + 1);

    const again = await inject('POST', '/org/plans/free/archive');
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(body);
    expect(lastWrite()).toMatchObject({ details: null, catalogChanged: true, events: [] });
    expect(await catalogVersion()).toBe(version + 1);

    expect((await inject('GET', '/org/plans/free')).json().archived).toBe(true);
    const listed = (await inject('GET', '/org/plans?kind=catalog')).json().plans as {
      key: string;
      archived: boolean;
    }[];
    expect(listed.find((p) => p.key === 'free')?.archived).toBe(true);
    expect(listed.find((p) => p.key === 'pro')?.archived).toBe(false);
  });

  it('unarchives, idempotently', async () => {
    const { inject, lastWrite } = await suite.world({ plans: true });
    expect((await inject('POST', '/org/plans/free/archive')).statusCode).toBe(200);
    const res = await inject('POST', '/org/plans/free/unarchive');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ key: 'free', archived: false });
    expect(lastWrite()).toMatchObject({
      details: { archived: { from: true, to: false } },
      events: [{ type: 'plan.unarchived' }],
    });
    const again = await inject('POST', '/org/plans/free/unarchive');
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(res.json());
    expect(lastWrite().details).toBeNull();
  });

  it('answers 404 for an unknown plan', async () => {
    const { inject } = await suite.world();
    expect((await inject('POST', '/org/plans/nope/archive')).statusCode).toBe(404);
    expect((await inject('POST', '/org/plans/nope/unarchive')).statusCode).toBe(404);
  });
});
