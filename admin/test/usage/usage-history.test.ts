import { Worker } from 'bullmq';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { getArrangement, publishArrangement, saveArrangement } from '@ent/common/metering/arrangement';
import { createEvalMeter } from '../../../gateway/src/metering/meter.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import {
  createAdminContext,
  createTestOrganization,
  ManualClock,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { recordUsageHistory, usageHistoryJob } from '../../src/features/usage/history.job.ts';
import { queueConnection } from '../../src/jobs/queues.ts';

const NOW = Date.parse('2026-05-14T09:30:00.000Z');
const clock = new ManualClock(NOW);
let ctx: AdminTestContext;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
});
afterAll(() => ctx.close());
beforeEach(() => clock.set(NOW));

/** The gate's usage hash as the eval path leaves it: what the job samples. */
const setCount = (org: TestOrganization, period: string, count: number) =>
  ctx.redis.hset(ctx.app.redisKeys.evalUsage(org.organization_id, period), 'count', count);

const sample = (batchSize?: number) =>
  recordUsageHistory(
    { db: ctx.db, redis: ctx.redis, clock, config: ctx.config },
    batchSize ? { batchSize } : {},
  );

const rowsOf = (org: TestOrganization) =>
  ctx.ownerDb
    .selectFrom('usage_days')
    .select(['period', 'count', 'eval_limit'])
    .select((eb) => eb.fn<string>('to_char', [eb.ref('day'), eb.val('YYYY-MM-DD')]).as('day'))
    .where('organization_id', '=', org.organization_id)
    .orderBy('day')
    .execute();

const history = (org: TestOrganization, query = '', headers = org.headers) =>
  ctx.app.inject({ method: 'GET', url: `/org/usage/history${query}`, headers });

const setLimit = async (org: TestOrganization, evalLimit: number | null) => {
  const arrangement = { plan: 'free', evalLimit, blocking: true, burstPerSecond: 100 };
  await saveArrangement(ctx.db, org.organization_id, arrangement);
  await publishArrangement(ctx.redis, ctx.app.redisKeys, org.organization_id, arrangement);
};

describe('the usage-history job', () => {
  it("records each organization's count of the month as today's sample, with its allotment", async () => {
    const busy = await createTestOrganization(ctx.db, 'Sampled busy');
    const partner = await createTestOrganization(ctx.db, 'Sampled partner');
    const idle = await createTestOrganization(ctx.db, 'Sampled idle');
    await setLimit(partner, 1000);
    await setCount(busy, '2026-05', 42);
    await setCount(partner, '2026-05', 7);

    // Batches of two: the organizations of this file span several.
    const result = await sample(2);
    expect(result.organizations).toBeGreaterThanOrEqual(3);

    expect(await rowsOf(busy)).toEqual([
      { day: '2026-05-14', period: '2026-05', count: 42, eval_limit: 250_000 },
    ]);
    expect(await rowsOf(partner)).toEqual([
      { day: '2026-05-14', period: '2026-05', count: 7, eval_limit: 1000 },
    ]);
    // Nothing counted this month (or Redis lost it): nothing to record.
    expect(await rowsOf(idle)).toEqual([]);
  });

  it('counts what the eval gate counted', async () => {
    const org = await createTestOrganization(ctx.db, 'Sampled gate');
    const meter = createEvalMeter({
      redis: ctx.redis,
      keys: ctx.app.redisKeys,
      loadArrangement: (organizationId) => getArrangement(ctx.db, organizationId),
    });
    for (let i = 0; i < 3; i++) {
      await meter.gate({ organizationId: org.organization_id, subscriberId: 'cus_1', nowMs: clock.now() });
    }
    await sample();
    expect(await rowsOf(org)).toMatchObject([{ day: '2026-05-14', count: 3 }]);
  });

  it('raises a day as the count grows, one row per day, and never lowers one when Redis loses the hash', async () => {
    const org = await createTestOrganization(ctx.db, 'Sampled loss');
    await setCount(org, '2026-05', 100);
    await sample();
    await setCount(org, '2026-05', 150);
    clock.advance(60_000);
    await sample();
    expect(await rowsOf(org)).toMatchObject([{ day: '2026-05-14', count: 150 }]);

    // Redis restarts empty and the gate counts from zero again.
    await ctx.redis.del(ctx.app.redisKeys.evalUsage(org.organization_id, '2026-05'));
    await sample();
    await setCount(org, '2026-05', 3);
    await sample();
    expect(await rowsOf(org)).toMatchObject([{ day: '2026-05-14', count: 150 }]);

    clock.set(Date.parse('2026-05-15T08:00:00.000Z'));
    await sample();
    expect(await rowsOf(org)).toMatchObject([
      { day: '2026-05-14', count: 150 },
      { day: '2026-05-15', count: 3 },
    ]);
    // The month's figure is still the highest recorded.
    expect((await history(org)).json().months[0]).toMatchObject({ period: '2026-05', count: 150 });
  });

  it("records the previous month's final figure in the first days of a month, with that month's allotment", async () => {
    const org = await createTestOrganization(ctx.db, 'Sampled month end');
    clock.set(Date.parse('2026-05-31T23:59:00.000Z'));
    await setCount(org, '2026-05', 900);
    await sample();

    // Late counts land in May after midnight (a gateway that failed open adds its local counts); the limit changed.
    clock.set(Date.parse('2026-06-01T00:05:00.000Z'));
    await setLimit(org, 5000);
    await setCount(org, '2026-05', 960);
    await setCount(org, '2026-06', 4);
    await sample();
    expect(await rowsOf(org)).toEqual([
      { day: '2026-05-31', period: '2026-05', count: 960, eval_limit: 250_000 },
      { day: '2026-06-01', period: '2026-06', count: 4, eval_limit: 5000 },
    ]);

    // Past the window the previous month is left alone.
    clock.set(Date.parse('2026-06-10T00:00:00.000Z'));
    await setCount(org, '2026-05', 999);
    await sample();
    expect((await rowsOf(org))[0]).toMatchObject({ day: '2026-05-31', count: 960 });
  });

  it('runs as the usage-history queue job, and repeats every minute', async () => {
    expect(usageHistoryJob).toMatchObject({ queue: 'usage-history', repeatEveryMs: 60_000 });
    const org = await createTestOrganization(ctx.db, 'Sampled by the worker');
    await setCount(org, '2026-05', 11);
    const { connection, prefix } = queueConnection(ctx.config);
    const worker = new Worker(
      'usage-history',
      usageHistoryJob.processor({
        config: ctx.config,
        clock,
        db: ctx.db,
        redis: ctx.redis,
        queues: ctx.app.queues,
      }),
      { connection, prefix },
    );
    try {
      const job = await ctx.app.queues['usage-history'].add('usage-history', {});
      const deadline = Date.now() + 10_000;
      while (!(await job.isCompleted()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(await job.isCompleted()).toBe(true);
    } finally {
      await worker.close();
    }
    expect(await rowsOf(org)).toMatchObject([{ day: '2026-05-14', count: 11 }]);
  });
});

describe('GET /org/usage/history', () => {
  /** Samples of earlier months, recorded as the job would have. */
  const seed = (org: TestOrganization, rows: [day: string, count: number, limit: number | null][]) =>
    ctx.db
      .insertInto('usage_days')
      .values(
        rows.map(([day, count, eval_limit]) => ({
          organization_id: org.organization_id,
          day,
          period: day.slice(0, 7),
          count,
          eval_limit,
        })),
      )
      .execute();

  it('answers the months newest first with their days, the current month merged with the live count', async () => {
    const org = await createTestOrganization(ctx.db, 'History');
    await seed(org, [
      ['2025-11-30', 5, 250_000],
      ['2026-03-01', 10, 250_000],
      ['2026-03-31', 900, 1000],
      ['2026-05-01', 20, 250_000],
      ['2026-05-13', 60, 250_000],
      ['2026-05-14', 70, 250_000],
    ]);
    // The job last ran a while ago; Redis has counted more since.
    await setCount(org, '2026-05', 85);

    const res = await history(org);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      months: [
        {
          period: '2026-05',
          count: 85,
          limit: 250_000,
          days: [
            { date: '2026-05-01', count: 20 },
            { date: '2026-05-13', count: 60 },
            { date: '2026-05-14', count: 85 },
          ],
        },
        // April has no samples: absent. November 2025 is the seventh month back: outside the default six.
        {
          period: '2026-03',
          count: 900,
          limit: 1000,
          days: [
            { date: '2026-03-01', count: 10 },
            { date: '2026-03-31', count: 900 },
          ],
        },
      ],
    });

    const year = (await history(org, '?months=12')).json();
    expect(year.months.map((month: { period: string }) => month.period)).toEqual([
      '2026-05',
      '2026-03',
      '2025-11',
    ]);
    expect((await history(org, '?months=1')).json().months).toHaveLength(1);
  });

  it("keeps the recorded figure when it is above Redis's, and adds today's point", async () => {
    const org = await createTestOrganization(ctx.db, 'History behind');
    await seed(org, [['2026-05-10', 500, 250_000]]);
    await setCount(org, '2026-05', 2);
    expect((await history(org)).json().months[0]).toEqual({
      period: '2026-05',
      count: 500,
      limit: 250_000,
      days: [
        { date: '2026-05-10', count: 500 },
        { date: '2026-05-14', count: 2 },
      ],
    });
  });

  it('answers a new organization with the current month only, and an unlimited one with limit null', async () => {
    const org = await createTestOrganization(ctx.db, 'History fresh');
    expect((await history(org)).json()).toEqual({
      months: [{ period: '2026-05', count: 0, limit: 250_000, days: [{ date: '2026-05-14', count: 0 }] }],
    });
    await setLimit(org, null);
    expect((await history(org)).json().months[0].limit).toBeNull();
  });

  it("shows only the calling organization's history", async () => {
    const mine = await createTestOrganization(ctx.db, 'History mine');
    const theirs = await createTestOrganization(ctx.db, 'History theirs');
    await seed(theirs, [['2026-04-30', 1234, 250_000]]);
    await setCount(theirs, '2026-05', 99);
    expect((await history(mine)).json().months).toEqual([
      { period: '2026-05', count: 0, limit: 250_000, days: [{ date: '2026-05-14', count: 0 }] },
    ]);
  });

  it('needs the subscribers:read scope', async () => {
    const org = await createTestOrganization(ctx.db, 'History scoped');
    const checkOnly = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    const catalog = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:read']);
    const reader = await createKeyWithScopes(ctx.db, org.organization_id, ['subscribers:read']);
    const as = (key: string) => history(org, '', { 'x-api-key': key });
    const refused = await as(checkOnly.apiKey);
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatchObject({ type: 'permission_error', code: 'FORBIDDEN' });
    expect((await as(catalog.apiKey)).statusCode).toBe(403);
    expect((await as(reader.apiKey)).statusCode).toBe(200);
    expect((await ctx.app.inject({ method: 'GET', url: '/org/usage/history' })).statusCode).toBe(401);
  });

  it.each(['?months=0', '?months=25', '?months=abc', '?months=1.5', '?months=', '?period=2026-01'])(
    'refuses %s with 422 VALIDATION_ERROR',
    async (query) => {
      const org = await createTestOrganization(ctx.db, 'History bad query');
      const res = await history(org, query);
      expect(res.statusCode).toBe(422);
      expect(res.json().error).toMatchObject({
        type: 'invalid_request_error',
        code: 'VALIDATION_ERROR',
        details: { location: 'querystring' },
      });
    },
  );

  it('is documented in /openapi.json with its query parameter', async () => {
    const doc = (await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const operation = doc.paths['/org/usage/history'].get;
    expect(operation.parameters).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'months', in: 'query' })]),
    );
    expect(operation.responses['200']).toBeDefined();
  });
});
