import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { meteredMember } from '@ent/common/redis/keys';
import {
  createAdminContext,
  createTestOrganization,
  ManualClock,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { caller } from '../../../test-support/identity-context.ts';
import { auditLog } from '../audit/log.ts';
import { changeBalance, meteredSubscriber } from './balances.ts';

const NOVEMBER_15 = Date.UTC(2026, 10, 15, 12);
const NOVEMBER = Date.UTC(2026, 10, 1);
const DECEMBER = Date.UTC(2026, 11, 1);
/** Month starts, newest first, before November 2026. */
const PAST_MONTHS = [9, 8, 7, 6, 5].map((month) => Date.UTC(2026, month, 1));

let ctx: AdminTestContext;
let org: TestOrganization;
let api: ReturnType<typeof caller>;
const clock = new ManualClock(NOVEMBER_15);
const audit = auditLog(() => ({ ctx, org }));
/** Requests whose write transaction fails at commit time (the header names how). */
const FAIL_COMMIT = 'x-test-fail-commit';

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  let deadlocks = 0;
  ctx.app.writePipeline.beforeCommit(async (_trx, request) => {
    const failure = request.headers[FAIL_COMMIT];
    if (failure === 'error') throw new Error('the commit failed');
    // Postgres ends the first attempt as a deadlock victim: the pipeline runs the write again.
    if (failure === 'deadlock-once' && deadlocks++ === 0)
      throw Object.assign(new Error('deadlock detected'), { code: '40P01' });
  });
});
afterAll(async () => {
  await ctx?.close();
});
beforeEach(async () => {
  clock.set(NOVEMBER_15);
  org = await createTestOrganization(ctx.db, 'Acme');
  api = caller(ctx, org.api_key);
  await meteredSubscriber(ctx, org, { subscriberId: 'alice', feature: 'api-calls', limit: 100 });
  const flag = await api.post('/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });
  expect(flag.statusCode).toBe(201);
});

const keys = () => ctx.app.redisKeys;
const novemberBalance = {
  subscriberId: 'alice',
  feature: 'api-calls',
  periodStartMs: NOVEMBER,
  periodEndMs: DECEMBER,
};
const member = meteredMember('alice', 'api-calls', NOVEMBER);
const redisFigures = () => ctx.redis.hgetall(keys().meteredBalance(org.organization_id, member));

async function persistRow(
  periodStartMs: number,
  used: number,
  revision = 1,
  periodEndMs: number | null = null,
) {
  await ctx.db
    .insertInto('metered_usage')
    .values({
      organization_id: org.organization_id,
      subscriber_id: 'alice',
      feature_key: 'api-calls',
      period_start: new Date(periodStartMs),
      period_end: periodEndMs === null ? null : new Date(periodEndMs),
      used,
      revision,
    })
    .execute();
}

const correct = (used: number, headers: Record<string, string> = {}) =>
  ctx.app.inject({
    method: 'PUT',
    url: '/org/subscribers/alice/usage/api-calls',
    headers: { ...org.headers, ...headers },
    payload: { used },
  });

describe('GET /org/subscribers/{id}/usage/{feature}/periods', () => {
  beforeEach(async () => {
    for (const [i, start] of PAST_MONTHS.entries())
      await persistRow(start, 10 * (i + 1), 1, i === 0 ? NOVEMBER : PAST_MONTHS[i - 1]!);
    await persistRow(NOVEMBER, 7, 1, DECEMBER);
  });

  it('lists past periods newest first, without the current one', async () => {
    const res = await api.get('/org/subscribers/alice/usage/api-calls/periods');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      periods: [
        {
          feature: 'api-calls',
          period_start: '2026-10-01T00:00:00.000Z',
          period_end: '2026-11-01T00:00:00.000Z',
          used: 10,
        },
        {
          feature: 'api-calls',
          period_start: '2026-09-01T00:00:00.000Z',
          period_end: '2026-10-01T00:00:00.000Z',
          used: 20,
        },
        {
          feature: 'api-calls',
          period_start: '2026-08-01T00:00:00.000Z',
          period_end: '2026-09-01T00:00:00.000Z',
          used: 30,
        },
        {
          feature: 'api-calls',
          period_start: '2026-07-01T00:00:00.000Z',
          period_end: '2026-08-01T00:00:00.000Z',
          used: 40,
        },
        {
          feature: 'api-calls',
          period_start: '2026-06-01T00:00:00.000Z',
          period_end: '2026-07-01T00:00:00.000Z',
          used: 50,
        },
      ],
      has_more: false,
    });
  });

  it('pages with limit and starting_after (a period_start)', async () => {
    const first = await api.get('/org/subscribers/alice/usage/api-calls/periods?limit=2');
    expect(first.json().has_more).toBe(true);
    const starts = (body: { periods: { period_start: string }[] }) => body.periods.map((p) => p.period_start);
    expect(starts(first.json())).toEqual(['2026-10-01T00:00:00.000Z', '2026-09-01T00:00:00.000Z']);
    const second = await api.get(
      '/org/subscribers/alice/usage/api-calls/periods?limit=2&starting_after=2026-09-01T00:00:00.000Z',
    );
    expect(starts(second.json())).toEqual(['2026-08-01T00:00:00.000Z', '2026-07-01T00:00:00.000Z']);
    expect(second.json().has_more).toBe(true);
    const last = await api.get(
      '/org/subscribers/alice/usage/api-calls/periods?limit=2&starting_after=2026-07-01T00:00:00.000Z',
    );
    expect(last.json()).toMatchObject({ has_more: false });
    expect(starts(last.json())).toEqual(['2026-06-01T00:00:00.000Z']);
  });

  it('lists the period a change of reset left behind, and nothing for another subscriber', async () => {
    const update = await api.patch('/org/plans/plan-api-calls', {
      grants: [{ feature: 'api-calls', kind: 'metered', limit: 100, reset: 'day' }],
    });
    expect(update.statusCode, update.body).toBe(200);
    const res = await api.get('/org/subscribers/alice/usage/api-calls/periods?limit=1');
    expect(res.json().periods[0]).toMatchObject({ period_start: '2026-11-01T00:00:00.000Z', used: 7 });
    await api.post('/org/subscribers', { subscriber_id: 'bob' });
    expect((await api.get('/org/subscribers/bob/usage/api-calls/periods')).json()).toEqual({
      periods: [],
      has_more: false,
    });
  });

  it.each([
    ['/org/subscribers/nobody/usage/api-calls/periods', 404, 'NOT_FOUND', 'subscriber_id'],
    ['/org/subscribers/alice/usage/nothing/periods', 404, 'NOT_FOUND', 'feature'],
    ['/org/subscribers/alice/usage/sso/periods', 422, 'VALIDATION_ERROR', 'feature'],
    [
      '/org/subscribers/alice/usage/api-calls/periods?starting_after=yesterday',
      422,
      'VALIDATION_ERROR',
      'starting_after',
    ],
    // The current period is not a past one, and a period of no row names nothing.
    [
      '/org/subscribers/alice/usage/api-calls/periods?starting_after=2026-11-01T00:00:00.000Z',
      422,
      'VALIDATION_ERROR',
      'starting_after',
    ],
    [
      '/org/subscribers/alice/usage/api-calls/periods?starting_after=2025-01-01T00:00:00.000Z',
      422,
      'VALIDATION_ERROR',
      'starting_after',
    ],
    ['/org/subscribers/alice/usage/api-calls/periods?limit=0', 422, 'VALIDATION_ERROR', undefined],
    ['/org/subscribers/alice/usage/api-calls/periods?since=x', 422, 'VALIDATION_ERROR', undefined],
  ])('%s answers %d %s', async (url, status, code, field) => {
    const res = await api.get(url);
    expect(res.statusCode).toBe(status);
    expect(res.json().error.code).toBe(code);
    if (field) expect(res.json().error.details.field).toBe(field);
  });

  it('is invisible to another organization (its subscriber alice is unknown there)', async () => {
    const other = await createTestOrganization(ctx.db, 'Other');
    const res = await caller(ctx, other.api_key).get('/org/subscribers/alice/usage/api-calls/periods');
    expect(res.statusCode).toBe(404);
  });
});

describe('PUT /org/subscribers/{id}/usage/{feature}', () => {
  it('sets the current figure in Redis, marks it dirty, answers the check result and audits from -> to', async () => {
    await changeBalance(ctx.redis, keys(), org.organization_id, novemberBalance, { used: 40, revision: 3 });
    await ctx.redis.srem(keys().meteredDirty(org.organization_id), member);
    const res = await correct(10);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      feature: 'api-calls',
      kind: 'metered',
      limit: 100,
      used: 10,
      remaining: 90,
      allowed: true,
      period_start: '2026-11-01T00:00:00.000Z',
      resets_at: '2026-12-01T00:00:00.000Z',
      source: 'plan',
      credits: [],
    });
    expect(await redisFigures()).toEqual({ u: '10', r: '4', e: String(DECEMBER) });
    expect(await ctx.redis.sismember(keys().meteredDirty(org.organization_id), member)).toBe(1);
    expect(await ctx.redis.sismember(keys().meteredDirtyOrganizations, org.organization_id)).toBe(1);
    const entry = await audit.entryFor(res.headers['x-request-id'] as string);
    expect(entry).toMatchObject({
      method: 'PUT',
      route: '/org/subscribers/{subscriber_id}/usage/{feature}',
      params: { subscriber_id: 'alice', feature: 'api-calls' },
      outcome: 'responded',
      status: 200,
      details: { period_start: '2026-11-01T00:00:00.000Z', used: { from: 40, to: 10 } },
    });
  });

  it('starts from what Postgres holds when Redis has no balance, past its revision', async () => {
    await persistRow(NOVEMBER, 33, 7, DECEMBER);
    const res = await correct(50);
    expect(res.json()).toMatchObject({ used: 50, remaining: 50 });
    // Past Postgres's 7: the persisted figure merged in first (8, as a gateway's refill does), then the correction.
    expect(await redisFigures()).toEqual({ u: '50', r: '9', e: String(DECEMBER) });
    expect((await audit.entryFor(res.headers['x-request-id'] as string)).details).toEqual({
      period_start: '2026-11-01T00:00:00.000Z',
      used: { from: 33, to: 50 },
    });
    // It lives until 35 days after its period's end on the app's clock, as the gateway's balances do.
    const ttl = await ctx.redis.pttl(keys().meteredBalance(org.organization_id, member));
    const untilThen = DECEMBER + 35 * 86_400_000 - clock.now();
    expect(ttl).toBeLessThanOrEqual(untilThen);
    expect(ttl).toBeGreaterThan(untilThen - 10_000);
  });

  it('changes nothing (details null) when the figure already is the one given', async () => {
    await changeBalance(ctx.redis, keys(), org.organization_id, novemberBalance, { used: 25, revision: 2 });
    const res = await correct(25);
    expect(res.json()).toMatchObject({ used: 25 });
    expect(await redisFigures()).toMatchObject({ u: '25', r: '2' });
    expect((await audit.entryFor(res.headers['x-request-id'] as string)).details).toBeNull();
  });

  it('a correction over the limit answers allowed false', async () => {
    const res = await correct(150);
    expect(res.json()).toMatchObject({ used: 150, remaining: 0, allowed: false });
  });

  it('takes the figure back when the transaction does not commit, and audits no change', async () => {
    await changeBalance(ctx.redis, keys(), org.organization_id, novemberBalance, { used: 40, revision: 3 });
    const res = await correct(10, { [FAIL_COMMIT]: 'error' });
    expect(res.statusCode).toBe(500);
    expect(await redisFigures()).toMatchObject({ u: '40', r: '5' });
    expect(await audit.entryFor(res.headers['x-request-id'] as string)).toMatchObject({
      outcome: 'responded',
      status: 500,
      details: null,
    });
  });

  it('run again after a deadlock, audits the figure from before the first attempt', async () => {
    await changeBalance(ctx.redis, keys(), org.organization_id, novemberBalance, { used: 40, revision: 3 });
    const res = await correct(10, { [FAIL_COMMIT]: 'deadlock-once' });
    expect(res.statusCode, res.body).toBe(200);
    expect(await redisFigures()).toMatchObject({ u: '10' });
    expect((await audit.entryFor(res.headers['x-request-id'] as string)).details).toMatchObject({
      used: { from: 40, to: 10 },
    });
  });

  it.each([
    ['/org/subscribers/nobody/usage/api-calls', { used: 1 }, 404, 'subscriber_id'],
    ['/org/subscribers/alice/usage/nothing', { used: 1 }, 404, 'feature'],
    ['/org/subscribers/alice/usage/sso', { used: 1 }, 422, 'feature'],
    ['/org/subscribers/alice/usage/api-calls', { used: -1 }, 422, undefined],
    ['/org/subscribers/alice/usage/api-calls', { used: 1, extra: true }, 422, undefined],
    ['/org/subscribers/alice/usage/api-calls', { used: 1.5 }, 422, undefined],
  ])('PUT %s %j answers %d', async (url, payload, status, field) => {
    const res = await ctx.app.inject({ method: 'PUT', url, headers: org.headers, payload });
    expect(res.statusCode).toBe(status);
    if (field) expect(res.json().error.details.field).toBe(field);
    expect(await ctx.redis.exists(keys().meteredBalance(org.organization_id, member))).toBe(0);
  });
});
