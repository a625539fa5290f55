import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MAX_LIVE_CREDITS_PER_FEATURE } from '@ent/contract/credits';
import type { WriteOutcome } from '../../src/features/shared/write/outcome.ts';
import {
  ManualClock,
  createAdminContext,
  createTestOrganization,
  subscriberVersion,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { auditLog } from '../audit/log.ts';

const NOW = Date.parse('2027-03-15T12:00:00.000Z');
const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();

let ctx: AdminTestContext;
let org: TestOrganization;
const clock = new ManualClock(NOW);
const writes: WriteOutcome[] = [];
const lastWrite = () => writes[writes.length - 1]!;
const audit = auditLog(() => ({ ctx, org }));

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  ctx.app.writePipeline.onCommitted(async (_request, write) => void writes.push(write));
});
// Every case gets an organization of its own: a metered, a limit and a flag feature, two subscribers.
beforeEach(async () => {
  clock.set(NOW);
  org = await createTestOrganization(ctx.db, 'Acme');
  for (const [key, kind] of [
    ['api-calls', 'metered'],
    ['tokens', 'metered'],
    ['seats', 'limit'],
    ['sso', 'flag'],
  ]) {
    const res = await inject('POST', '/org/features', { key, name: key, kind });
    expect(res.statusCode).toBe(201);
  }
  for (const subscriber_id of ['alice', 'bob']) {
    expect((await inject('POST', '/org/subscribers', { subscriber_id })).statusCode).toBe(201);
  }
});
afterAll(() => ctx.close());

const inject = (method: 'POST' | 'GET' | 'DELETE', url: string, payload?: object, headers = org.headers) =>
  ctx.app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
const credits = (subscriberId: string) => `/org/subscribers/${subscriberId}/credits`;
const create = (subscriberId: string, payload: object) => inject('POST', credits(subscriberId), payload);
const list = async (subscriberId: string, query = '') => {
  const res = await inject('GET', `${credits(subscriberId)}${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { credits: Array<Record<string, unknown>>; has_more: boolean };
};
const voidIt = (subscriberId: string, creditId: string) =>
  inject('DELETE', `${credits(subscriberId)}/${creditId}`);

describe('POST /org/subscribers/{id}/credits', () => {
  it('creates a credit with 201, bumps the subscriber version, audits and raises credit.created', async () => {
    const before = await subscriberVersion(ctx.db, org.organization_id, 'alice');
    const res = await create('alice', {
      feature: 'api-calls',
      amount: 500,
      expires_at: iso(NOW + 30 * DAY),
      name: 'Spring promotion',
    });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      credit_id: expect.stringMatching(/^cr_[0-9a-z]{26}$/),
      subscriber_id: 'alice',
      feature: 'api-calls',
      name: 'Spring promotion',
      amount: 500,
      spent: 0,
      remaining: 500,
      priority: 10,
      effective_at: iso(NOW),
      expires_at: iso(NOW + 30 * DAY),
      status: 'active',
      source: 'manual',
      voided_at: null,
      created_at: expect.any(String),
    });
    expect(await subscriberVersion(ctx.db, org.organization_id, 'alice')).toBe(before + 1);
    const write = lastWrite();
    expect([...write.subscribersChanged]).toEqual(['alice']);
    expect(write.events).toEqual([{ type: 'credit.created', data: { credit: body } }]);
    const entry = await audit.entryFor(res.headers['x-request-id'] as string);
    expect(entry.route).toBe('/org/subscribers/{subscriber_id}/credits');
    expect(entry.details).toEqual({
      credit_id: body.credit_id,
      feature: 'api-calls',
      amount: 500,
      priority: 10,
      effective_at: iso(NOW),
      expires_at: iso(NOW + 30 * DAY),
      name: 'Spring promotion',
    });
  });

  it('takes a future effective_at (scheduled), a priority and no expiry', async () => {
    const res = await create('alice', {
      feature: 'api-calls',
      amount: 7,
      effective_at: iso(NOW + DAY),
      priority: 1,
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({
      status: 'scheduled',
      remaining: 7,
      priority: 1,
      expires_at: null,
      name: null,
    });
    clock.set(NOW + 2 * DAY);
    expect((await list('alice')).credits[0]).toMatchObject({ status: 'active', remaining: 7 });
  });

  it.each([
    ['an unknown feature', { feature: 'nope', amount: 1 }, 'feature'],
    ['a limit feature', { feature: 'seats', amount: 1 }, 'feature'],
    ['a flag feature', { feature: 'sso', amount: 1 }, 'feature'],
    [
      'expires_at before effective_at',
      { feature: 'api-calls', amount: 1, expires_at: iso(NOW - DAY) },
      'expires_at',
    ],
    [
      'expires_at equal to effective_at',
      { feature: 'api-calls', amount: 1, effective_at: iso(NOW + DAY), expires_at: iso(NOW + DAY) },
      'expires_at',
    ],
    ['a zero amount', { feature: 'api-calls', amount: 0 }, 'amount'],
    ['a priority of 0', { feature: 'api-calls', amount: 1, priority: 0 }, 'priority'],
    ['an unknown field', { feature: 'api-calls', amount: 1, spent: 3 }, undefined],
  ])('refuses %s with 422 VALIDATION_ERROR', async (_name, payload, field) => {
    const before = await subscriberVersion(ctx.db, org.organization_id, 'alice');
    const res = await create('alice', payload);
    expect(res.statusCode, res.body).toBe(422);
    const error = res.json().error;
    expect(error.code).toBe('VALIDATION_ERROR');
    if (field === 'feature' || field === 'expires_at') expect(error.details.field).toBe(field);
    else if (field) expect(JSON.stringify(error)).toContain(field);
    expect(await subscriberVersion(ctx.db, org.organization_id, 'alice')).toBe(before);
  });

  it('answers 404 NOT_FOUND for an unknown subscriber', async () => {
    const res = await create('nobody', { feature: 'api-calls', amount: 1 });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });

  it(`refuses credit ${MAX_LIVE_CREDITS_PER_FEATURE + 1} live on one feature; an expired or voided one frees a place`, async () => {
    const ids: string[] = [];
    const expiring = await create('alice', { feature: 'api-calls', amount: 1, expires_at: iso(NOW + DAY) });
    ids.push(expiring.json().credit_id);
    const voidable = await create('alice', { feature: 'api-calls', amount: 1 });
    ids.push(voidable.json().credit_id);
    // The rest straight into the table: the route's count is what is under test, not 98 more requests.
    const feature = await ctx.db
      .selectFrom('features')
      .select('id')
      .where('organization_id', '=', org.organization_id)
      .where('key', '=', 'api-calls')
      .executeTakeFirstOrThrow();
    await ctx.db
      .insertInto('credits')
      .values(
        Array.from({ length: MAX_LIVE_CREDITS_PER_FEATURE - 2 }, (_, i) => ({
          id: `cr_bulk${i}`,
          organization_id: org.organization_id,
          subscriber_id: 'alice',
          feature_id: feature.id,
          name: null,
          amount: 1,
          priority: 10,
          effective_at: new Date(NOW),
          expires_at: null,
          source: 'manual' as const,
        })),
      )
      .execute();
    const refused = await create('alice', { feature: 'api-calls', amount: 1 });
    expect(refused.statusCode).toBe(422);
    expect(refused.json().error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'feature', limit: MAX_LIVE_CREDITS_PER_FEATURE },
    });
    // Another feature and another subscriber count apart.
    expect((await create('alice', { feature: 'tokens', amount: 1 })).statusCode).toBe(201);
    expect((await create('bob', { feature: 'api-calls', amount: 1 })).statusCode).toBe(201);
    clock.set(NOW + 2 * DAY);
    expect((await create('alice', { feature: 'api-calls', amount: 1 })).statusCode).toBe(201);
    expect((await create('alice', { feature: 'api-calls', amount: 1 })).statusCode).toBe(422);
    expect((await voidIt('alice', ids[1]!)).statusCode).toBe(200);
    expect((await create('alice', { feature: 'api-calls', amount: 1 })).statusCode).toBe(201);
  });

  it('needs subscribers:write; a key with subscribers:read only gets 403 on writes and may list', async () => {
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['subscribers:read']);
    const headers = { 'x-api-key': apiKey };
    const credit = (await create('alice', { feature: 'api-calls', amount: 1 })).json().credit_id as string;
    expect(
      (await inject('POST', credits('alice'), { feature: 'api-calls', amount: 1 }, headers)).statusCode,
    ).toBe(403);
    expect((await inject('DELETE', `${credits('alice')}/${credit}`, undefined, headers)).statusCode).toBe(
      403,
    );
    expect((await inject('GET', credits('alice'), undefined, headers)).statusCode).toBe(200);
  });

  it('replays a write under the same Idempotency-Key, creating one credit', async () => {
    const headers = { ...org.headers, 'idempotency-key': 'credit-once' };
    const payload = { feature: 'api-calls', amount: 10 };
    const first = await inject('POST', credits('alice'), payload, headers);
    const second = await inject('POST', credits('alice'), payload, headers);
    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.json()).toEqual(first.json());
    expect((await list('alice')).credits).toHaveLength(1);
  });
});

describe('GET /org/subscribers/{id}/credits', () => {
  it('lists newest first, pages with starting_after, filters by feature and status', async () => {
    const made: string[] = [];
    for (const [feature, amount] of [
      ['api-calls', 1],
      ['tokens', 2],
      ['api-calls', 3],
      ['api-calls', 4],
    ] as const) {
      clock.set(clock.now() + 1000);
      const res = await create('alice', { feature, amount });
      expect(res.statusCode).toBe(201);
      made.push(res.json().credit_id);
    }
    await create('bob', { feature: 'api-calls', amount: 9 });
    const all = await list('alice');
    expect(all.credits.map((c) => c.credit_id)).toEqual([...made].reverse());
    const first = await list('alice', '?limit=2');
    expect(first.has_more).toBe(true);
    const second = await list('alice', `?limit=2&starting_after=${first.credits[1]!.credit_id as string}`);
    expect([...first.credits, ...second.credits].map((c) => c.credit_id)).toEqual([...made].reverse());
    expect(second.has_more).toBe(false);
    expect((await list('alice', '?feature=tokens')).credits.map((c) => c.amount)).toEqual([2]);
    expect((await voidIt('alice', made[0]!)).statusCode).toBe(200);
    expect((await list('alice', '?status=voided')).credits.map((c) => c.amount)).toEqual([1]);
    expect((await list('alice', '?status=active')).credits.map((c) => c.amount)).toEqual([4, 3, 2]);
    expect((await list('alice', '?status=active&limit=1')).has_more).toBe(true);
  });

  it('computes spent and remaining from Redis where it holds a figure, and spent/expired statuses', async () => {
    const a = (
      await create('alice', { feature: 'api-calls', amount: 10, expires_at: iso(NOW + DAY) })
    ).json();
    const b = (await create('alice', { feature: 'api-calls', amount: 5 })).json();
    await ctx.redis.hset(ctx.app.redisKeys.creditSpent(org.organization_id, 'alice', 'api-calls'), {
      [a.credit_id]: 4,
      [b.credit_id]: 5,
    });
    const byId = async () => new Map((await list('alice')).credits.map((c) => [c.credit_id, c]));
    let listed = await byId();
    expect(listed.get(a.credit_id)).toMatchObject({ spent: 4, remaining: 6, status: 'active' });
    expect(listed.get(b.credit_id)).toMatchObject({ spent: 5, remaining: 0, status: 'spent' });
    expect((await list('alice', '?status=spent')).credits.map((c) => c.credit_id)).toEqual([b.credit_id]);
    clock.set(NOW + DAY);
    listed = await byId();
    expect(listed.get(a.credit_id)).toMatchObject({ spent: 4, remaining: 0, status: 'expired' });
    expect((await list('alice', '?status=expired')).credits.map((c) => c.credit_id)).toEqual([a.credit_id]);
  });

  it('answers 404 for an unknown subscriber and 422 for a cursor that names no credit of it', async () => {
    expect((await inject('GET', credits('nobody'))).statusCode).toBe(404);
    const bobs = (await create('bob', { feature: 'api-calls', amount: 1 })).json().credit_id as string;
    const res = await inject('GET', `${credits('alice')}?starting_after=${bobs}`);
    expect(res.statusCode).toBe(422);
    expect(res.json().error.details.field).toBe('starting_after');
    expect((await inject('GET', `${credits('alice')}?status=gone`)).statusCode).toBe(422);
  });
});

describe('DELETE /org/subscribers/{id}/credits/{credit_id}', () => {
  it('voids: 200 with the voided credit, spent kept, credit.voided once; again: 200 unchanged', async () => {
    const credit = (await create('alice', { feature: 'api-calls', amount: 10 })).json();
    await ctx.redis.hset(ctx.app.redisKeys.creditSpent(org.organization_id, 'alice', 'api-calls'), {
      [credit.credit_id]: 3,
    });
    const version = await subscriberVersion(ctx.db, org.organization_id, 'alice');
    clock.set(NOW + 1000);
    const res = await voidIt('alice', credit.credit_id);
    expect(res.statusCode, res.body).toBe(200);
    const voided = res.json();
    expect(voided).toMatchObject({ status: 'voided', spent: 3, remaining: 0, voided_at: iso(NOW + 1000) });
    expect(await subscriberVersion(ctx.db, org.organization_id, 'alice')).toBe(version + 1);
    expect(lastWrite().events).toEqual([{ type: 'credit.voided', data: { credit: voided } }]);
    const entry = await audit.entryFor(res.headers['x-request-id'] as string);
    expect(entry.details).toEqual({
      credit_id: credit.credit_id,
      voided_at: { from: null, to: iso(NOW + 1000) },
    });

    clock.set(NOW + 2000);
    const again = await voidIt('alice', credit.credit_id);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(voided);
    expect(lastWrite().events).toEqual([]);
    expect(lastWrite().details).toBeNull();
    expect((await audit.entryFor(again.headers['x-request-id'] as string)).details).toBeNull();
    expect(await subscriberVersion(ctx.db, org.organization_id, 'alice')).toBe(version + 1);
  });

  it("answers 404 NOT_FOUND for an unknown credit, another subscriber's credit or an unknown subscriber", async () => {
    const bobs = (await create('bob', { feature: 'api-calls', amount: 1 })).json().credit_id as string;
    for (const res of [
      await voidIt('alice', 'cr_nothing'),
      await voidIt('alice', bobs),
      await voidIt('nobody', bobs),
    ]) {
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('NOT_FOUND');
    }
  });
});
