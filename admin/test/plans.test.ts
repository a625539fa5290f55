import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyRequest } from 'fastify';
import { newId } from '@ent/common/ids';
import type { GrantBody } from '@ent/common/schemas/plans';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../test-support/api-keys.ts';
import type { WriteContext } from '../src/plugins/write-pipeline.ts';
import {
  archivedDetails,
  grantChanges,
  grantsByFeature,
  planCreatedDetails,
  planUpdatedDetails,
  type PlanState,
} from '../src/features/plans/grant-changes.ts';
import { resolveGrants } from '../src/features/plans/grants.ts';

let ctx: AdminTestContext;
let org: TestOrganization;
let other: TestOrganization;

/** Every committed write the pipeline reported, with the route and path it came from. */
const writes: { method: string; url: string; write: WriteContext }[] = [];

type Json = Record<string, unknown>;

const inject = (
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  payload?: unknown,
  headers = org.headers,
) =>
  ctx.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });

const createPlan = (payload: Json, headers = org.headers) => inject('POST', '/org/plans', payload, headers);

const catalogVersion = async (organizationId = org.organization_id) =>
  (
    await ctx.db
      .selectFrom('organizations')
      .select('catalog_version')
      .where('id', '=', organizationId)
      .executeTakeFirstOrThrow()
  ).catalog_version;

const planId = async (key: string, organizationId = org.organization_id) =>
  (
    await ctx.db
      .selectFrom('plans')
      .select('id')
      .where('organization_id', '=', organizationId)
      .where('key', '=', key)
      .executeTakeFirstOrThrow()
  ).id;

const lastWrite = () => writes[writes.length - 1]!;
const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

async function subscribe(plan: string, status: 'active' | 'canceled'): Promise<void> {
  const subscriberId = `cust-${status}-${plan}`;
  await ctx.db
    .insertInto('subscribers')
    .values({ organization_id: org.organization_id, subscriber_id: subscriberId, name: null })
    .execute();
  await ctx.db
    .insertInto('subscriptions')
    .values({
      id: newId('sub'),
      organization_id: org.organization_id,
      subscriber_id: subscriberId,
      plan_id: await planId(plan),
      status,
      canceled_at: status === 'canceled' ? new Date() : null,
    })
    .execute();
}

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Acme');
  other = await createTestOrganization(ctx.db, 'Other');
  ctx.app.writePipeline.onCommitted(async (request: FastifyRequest, write: WriteContext) => {
    writes.push({ method: request.method, url: request.url, write });
  });
  for (const [key, kind] of [
    ['sso', 'flag'],
    ['seats', 'limit'],
    ['api-calls', 'limit'],
    ['audit-log', 'flag'],
  ]) {
    const res = await inject('POST', '/org/features', { key, name: key, kind });
    expect(res.statusCode).toBe(201);
  }
  const otherFeature = await inject(
    'POST',
    '/org/features',
    { key: 'other-only', name: 'x', kind: 'flag' },
    other.headers,
  );
  expect(otherFeature.statusCode).toBe(201);
});
afterAll(() => ctx.close());

describe('POST /org/plans', () => {
  it('creates a plan with 201 and returns grants ordered by feature key', async () => {
    const before = await catalogVersion();
    const res = await createPlan({
      key: 'pro',
      name: 'Pro',
      kind: 'catalog',
      grants: [
        { feature: 'sso', kind: 'flag' },
        { feature: 'seats', kind: 'limit', limit: 10 },
        { feature: 'api-calls', kind: 'limit', limit: null },
      ],
    });
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
    expect(lastWrite().write).toMatchObject({
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
    const empty = await createPlan({ key: 'free', name: 'Free', kind: 'catalog' });
    expect(empty.statusCode).toBe(201);
    expect(empty.json().grants).toEqual([]);
    expect(lastWrite().write.details).toEqual({ key: 'free', name: 'Free', kind: 'catalog', grants: {} });
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
    const res = await createPlan({ key: 'invalid', name: 'Invalid', kind: 'catalog', grants });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
    expect((await inject('GET', '/org/plans/invalid')).statusCode).toBe(404);
  });

  it('answers malformed JSON with 422, not 500', async () => {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/org/plans',
      headers: { ...org.headers, 'content-type': 'application/json' },
      payload: '{"key": "x", ',
    });
    expect(res.statusCode).toBe(422);
  });
});

describe('GET /org/plans and /org/plans/{key}', () => {
  it('reads one plan by key', async () => {
    const res = await inject('GET', '/org/plans/pro');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      key: 'pro',
      archived: false,
      grants: [{ feature: 'api-calls' }, { feature: 'seats' }, { feature: 'sso' }],
    });
  });

  it('answers 404 NOT_FOUND for an unknown key', async () => {
    const res = await inject('GET', '/org/plans/nope');
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });

  it('lists plans ordered by key, with their grants', async () => {
    const res = await inject('GET', '/org/plans');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.plans.map((p: { key: string }) => p.key)).toEqual(['acme_custom', 'free', 'pro']);
    expect(body.has_more).toBe(false);
    expect(body.plans[2].grants.map((g: GrantBody) => g.feature)).toEqual(['api-calls', 'seats', 'sso']);
    expect(body.plans[0].grants).toEqual([{ feature: 'seats', kind: 'limit', limit: 0 }]);
  });

  it('filters by ?kind=', async () => {
    const custom = await inject('GET', '/org/plans?kind=custom');
    expect(custom.json().plans.map((p: { key: string }) => p.key)).toEqual(['acme_custom']);
    const catalog = await inject('GET', '/org/plans?kind=catalog');
    expect(catalog.json().plans.map((p: { key: string }) => p.key)).toEqual(['free', 'pro']);
    expect((await inject('GET', '/org/plans?kind=other')).statusCode).toBe(422);
  });

  it('pages with limit and starting_after', async () => {
    const first = await inject('GET', '/org/plans?limit=2');
    expect(first.json().plans.map((p: { key: string }) => p.key)).toEqual(['acme_custom', 'free']);
    expect(first.json().has_more).toBe(true);
    const next = await inject('GET', '/org/plans?limit=2&starting_after=free');
    expect(next.json()).toMatchObject({ plans: [{ key: 'pro', grants: [{}, {}, {}] }], has_more: false });
    const filtered = await inject('GET', '/org/plans?kind=catalog&limit=1&starting_after=free');
    expect(filtered.json()).toMatchObject({ plans: [{ key: 'pro' }], has_more: false });
  });

  it.each(['nope', 'zzz', '0'])('refuses starting_after=%s, which names no plan, with 422', async (cursor) => {
    const res = await inject('GET', `/org/plans?starting_after=${cursor}`);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'starting_after', value: cursor } });
  });

  it.each(['/org/plans?limit=0', '/org/plans?limit=101', '/org/plans?colour=blue', '/org/plans/pro?x=1'])(
    'refuses %s with 422',
    async (url) => {
      expect((await inject('GET', url)).statusCode).toBe(422);
    },
  );
});

describe('PATCH /org/plans/{key}', () => {
  it('changes the name and keeps the grants', async () => {
    const before = (await inject('GET', '/org/plans/pro')).json();
    await tick();
    const res = await inject('PATCH', '/org/plans/pro', { name: 'Professional' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ key: 'pro', name: 'Professional', kind: 'catalog', grants: before.grants });
    expect(body.updated_at > before.updated_at).toBe(true);
    expect(body.created_at).toBe(before.created_at);
    expect(lastWrite().write).toMatchObject({
      details: { name: { from: 'Pro', to: 'Professional' } },
      catalogChanged: true,
      events: [{ type: 'plan.updated', data: body }],
    });
  });

  it('replaces the whole grant list and reports a change per feature', async () => {
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
    expect(lastWrite().write.details).toEqual({
      grants: {
        'api-calls': { from: { kind: 'limit', limit: null }, to: null },
        'audit-log': { from: null, to: { kind: 'flag' } },
        seats: { from: { kind: 'limit', limit: 10 }, to: { kind: 'limit', limit: 25 } },
      },
    });
    expect(await catalogVersion()).toBe(version + 1);
  });

  it('empties the grant list with grants: []', async () => {
    await createPlan({
      key: 'trial',
      name: 'Trial',
      kind: 'catalog',
      grants: [{ feature: 'sso', kind: 'flag' }],
    });
    const res = await inject('PATCH', '/org/plans/trial', { grants: [] });
    expect(res.statusCode).toBe(200);
    expect(res.json().grants).toEqual([]);
    expect(lastWrite().write.details).toEqual({ grants: { sso: { from: { kind: 'flag' }, to: null } } });
  });

  it('changes nothing, bumps nothing and reports null details when the values are the same', async () => {
    const before = (await inject('GET', '/org/plans/pro')).json();
    const version = await catalogVersion();
    const count = writes.length;
    const res = await inject('PATCH', '/org/plans/pro', {
      name: before.name,
      grants: [...before.grants].reverse(),
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(before);
    expect(await catalogVersion()).toBe(version);
    expect(writes.length).toBe(count + 1);
    expect(lastWrite().write).toMatchObject({ details: null, catalogChanged: false, events: [] });
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
    const before = (await inject('GET', '/org/plans/pro')).json();
    const res = await inject('PATCH', '/org/plans/pro', { name: 'Changed', ...payload });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
    expect((await inject('GET', '/org/plans/pro')).json()).toEqual(before);
  });

  it('answers 404 for an unknown plan', async () => {
    expect((await inject('PATCH', '/org/plans/nope', { name: 'x' })).statusCode).toBe(404);
  });
});

describe('archive and unarchive', () => {
  it('archives, idempotently, and answers 200 with the plan', async () => {
    const version = await catalogVersion();
    const res = await inject('POST', '/org/plans/free/archive');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ key: 'free', archived: true, grants: [] });
    expect(lastWrite().write).toMatchObject({
      details: { archived: { from: false, to: true } },
      catalogChanged: true,
      events: [{ type: 'plan.archived', data: body }],
    });
    expect(await catalogVersion()).toBe(version + 1);

    const again = await inject('POST', '/org/plans/free/archive');
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(body);
    expect(lastWrite().write).toMatchObject({ details: null, catalogChanged: false, events: [] });
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
    const res = await inject('POST', '/org/plans/free/unarchive');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ key: 'free', archived: false });
    expect(lastWrite().write).toMatchObject({
      details: { archived: { from: true, to: false } },
      events: [{ type: 'plan.unarchived' }],
    });
    const again = await inject('POST', '/org/plans/free/unarchive');
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(res.json());
    expect(lastWrite().write.details).toBeNull();
  });

  it('answers 404 for an unknown plan', async () => {
    expect((await inject('POST', '/org/plans/nope/archive')).statusCode).toBe(404);
    expect((await inject('POST', '/org/plans/nope/unarchive')).statusCode).toBe(404);
  });
});

describe('DELETE /org/plans/{key}', () => {
  it('deletes an unreferenced plan with 204', async () => {
    await createPlan({
      key: 'doomed',
      name: 'Doomed',
      kind: 'custom',
      grants: [{ feature: 'sso', kind: 'flag' }],
    });
    const version = await catalogVersion();
    const res = await inject('DELETE', '/org/plans/doomed');
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    expect(lastWrite().write).toMatchObject({
      details: null,
      catalogChanged: true,
      events: [{ type: 'plan.deleted', data: { key: 'doomed', grants: [{ feature: 'sso', kind: 'flag' }] } }],
    });
    expect(await catalogVersion()).toBe(version + 1);
    expect((await inject('GET', '/org/plans/doomed')).statusCode).toBe(404);
    expect((await inject('DELETE', '/org/plans/doomed')).statusCode).toBe(404);
    const grants = await ctx.db.selectFrom('plan_grants').selectAll().execute();
    expect(grants.every((grant) => grant.plan_id.startsWith('plan_'))).toBe(true);
    const again = await createPlan({ key: 'doomed', name: 'Reborn', kind: 'catalog' });
    expect(again.statusCode).toBe(201);
  });

  it.each(['active', 'canceled'] as const)(
    'refuses with 409 CONFLICT while a %s subscription references the plan',
    async (status) => {
      const key = `held-${status}`;
      await createPlan({
        key,
        name: 'Held',
        kind: 'catalog',
        grants: [{ feature: 'seats', kind: 'limit', limit: 3 }],
      });
      await subscribe(key, status);
      const version = await catalogVersion();
      const res = await inject('DELETE', `/org/plans/${key}`);
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toMatchObject({ code: 'CONFLICT', details: { field: 'key', value: key } });
      expect((await inject('GET', `/org/plans/${key}`)).json()).toMatchObject({
        key,
        grants: [{ feature: 'seats', limit: 3 }],
      });
      expect(await catalogVersion()).toBe(version);
    },
  );
  it('answers 409, not 500, when a subscription is created while the delete runs', async () => {
    await createPlan({ key: 'racing', name: 'Racing', kind: 'catalog' });
    const id = await planId('racing');
    await ctx.db
      .insertInto('subscribers')
      .values({ organization_id: org.organization_id, subscriber_id: 'cust-racing', name: null })
      .execute();
    let pending: ReturnType<typeof inject> | undefined;
    await ctx.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('subscriptions')
        .values({
          id: newId('sub'),
          organization_id: org.organization_id,
          subscriber_id: 'cust-racing',
          plan_id: id,
        })
        .execute();
      pending = inject('DELETE', '/org/plans/racing');
      await new Promise((resolve) => setTimeout(resolve, 150));
    });
    const res = await pending!;
    expect(res.statusCode).toBe(409);
    expect(res.json().error.code).toBe('CONFLICT');
    expect((await inject('GET', '/org/plans/racing')).statusCode).toBe(200);
  });
});

describe('tenant isolation', () => {
  it("never shows, changes or deletes another organization's plans", async () => {
    expect((await inject('GET', '/org/plans/pro', undefined, other.headers)).statusCode).toBe(404);
    expect((await inject('PATCH', '/org/plans/pro', { name: 'hijack' }, other.headers)).statusCode).toBe(404);
    expect((await inject('POST', '/org/plans/pro/archive', undefined, other.headers)).statusCode).toBe(404);
    expect((await inject('POST', '/org/plans/pro/unarchive', undefined, other.headers)).statusCode).toBe(404);
    expect((await inject('DELETE', '/org/plans/pro', undefined, other.headers)).statusCode).toBe(404);
    expect((await inject('GET', '/org/plans', undefined, other.headers)).json()).toEqual({
      plans: [],
      has_more: false,
    });
    const mine = (await inject('GET', '/org/plans/pro')).json();
    expect(mine).toMatchObject({ name: 'Professional', archived: false });
  });

  it('lets each organization use the same key, and grants only its own features', async () => {
    const same = await createPlan(
      { key: 'pro', name: 'Their pro', kind: 'catalog', grants: [{ feature: 'other-only', kind: 'flag' }] },
      other.headers,
    );
    expect(same.statusCode).toBe(201);
    const foreign = await createPlan(
      { key: 'sneaky', name: 'x', kind: 'catalog', grants: [{ feature: 'sso', kind: 'flag' }] },
      other.headers,
    );
    expect(foreign.statusCode).toBe(422);
    expect(foreign.json().error.details).toMatchObject({ field: 'grants.0.feature', value: 'sso' });
    const patch = await inject('PATCH', '/org/plans/pro', {
      grants: [{ feature: 'other-only', kind: 'flag' }],
    });
    expect(patch.statusCode).toBe(422);
    expect((await inject('GET', '/org/plans/pro')).json().name).toBe('Professional');
  });
});

describe('plan scopes', () => {
  it('lets catalog:read read but not write', async () => {
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:read']);
    const headers = { 'x-api-key': apiKey };
    expect((await inject('GET', '/org/plans', undefined, headers)).statusCode).toBe(200);
    expect((await inject('GET', '/org/plans/pro', undefined, headers)).statusCode).toBe(200);
    for (const [method, url] of [
      ['POST', '/org/plans'],
      ['PATCH', '/org/plans/pro'],
      ['DELETE', '/org/plans/pro'],
      ['POST', '/org/plans/pro/archive'],
      ['POST', '/org/plans/pro/unarchive'],
    ] as const) {
      const res = await inject(
        method,
        url,
        method === 'DELETE' || url.endsWith('archive') ? undefined : { name: 'x' },
        headers,
      );
      expect(res.statusCode, `${method} ${url}`).toBe(403);
      expect(res.json().error.code).toBe('FORBIDDEN');
    }
  });

  it('lets catalog:write write but not read', async () => {
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:write']);
    const headers = { 'x-api-key': apiKey };
    expect((await inject('GET', '/org/plans', undefined, headers)).statusCode).toBe(403);
    expect((await inject('GET', '/org/plans/pro', undefined, headers)).statusCode).toBe(403);
    expect((await createPlan({ key: 'writer-made', name: 'x', kind: 'custom' }, headers)).statusCode).toBe(
      201,
    );
    expect((await inject('POST', '/org/plans/writer-made/archive', undefined, headers)).statusCode).toBe(200);
  });

  it('gives check-only keys and viewers 403 on writes', async () => {
    const check = { 'x-api-key': (await createKeyWithScopes(ctx.db, org.organization_id, ['check'])).apiKey };
    expect((await createPlan({ key: 'nope', name: 'x', kind: 'custom' }, check)).statusCode).toBe(403);
    expect((await inject('GET', '/org/plans', undefined, check)).statusCode).toBe(403);
    const viewer = {
      'x-api-key': (await createKeyWithScopes(ctx.db, org.organization_id, [], 'viewer')).apiKey,
    };
    expect((await inject('GET', '/org/plans', undefined, viewer)).statusCode).toBe(200);
    expect((await inject('DELETE', '/org/plans/writer-made', undefined, viewer)).statusCode).toBe(403);
  });

  it('answers 401 without a key', async () => {
    expect((await ctx.app.inject({ method: 'GET', url: '/org/plans' })).statusCode).toBe(401);
  });
});

describe('OpenAPI', () => {
  it('documents all seven plan routes', async () => {
    const doc = (await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(Object.keys(doc.paths['/org/plans']).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/org/plans/{key}']).sort()).toEqual(['delete', 'get', 'patch']);
    expect(doc.paths['/org/plans/{key}/archive'].post).toBeDefined();
    expect(doc.paths['/org/plans/{key}/unarchive'].post).toBeDefined();
  });

  it('documents the two eval routes too (answered by the gateway, served in the same document)', async () => {
    const doc = (await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const check = doc.paths['/org/subscribers/{subscriber_id}/entitlements/check'].post;
    expect(check.parameters).toEqual([expect.objectContaining({ in: 'path', name: 'subscriber_id', required: true })]);
    expect(check.requestBody.content['application/json'].schema).toMatchObject({ required: ['feature'] });
    expect(check.responses['200'].headers).toHaveProperty('X-Svc-Eval-Warn');
    expect(Object.keys(check.responses).sort()).toEqual(['200', '401', '403', '404', '409', '422', '429', '503']);
    const list = doc.paths['/org/subscribers/{subscriber_id}/entitlements'].get;
    expect(list.parameters.map((p: { name: string }) => p.name)).toEqual(['subscriber_id', 'all']);
    expect(list.responses['200'].content['application/json'].schema).toMatchObject({
      required: ['subscriber_id', 'entitlements'],
    });
    // The generated routes are all still there.
    expect(doc.paths['/org/plans'].post).toBeDefined();
    expect(doc.paths['/org/usage/current'].get).toBeDefined();
  });
});

describe('audit details (pure)', () => {
  const flag = (feature: string): GrantBody => ({ feature, kind: 'flag' });
  const limit = (feature: string, value: number | null): GrantBody => ({
    feature,
    kind: 'limit',
    limit: value,
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
  ];

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
      { featureId: 'feat_1', feature: 'sso', kind: 'flag', limit: null },
      { featureId: 'feat_2', feature: 'seats', kind: 'limit', limit: null },
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
    expect(fieldOf([])).toBeNull();
  });
});
