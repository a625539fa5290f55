import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Arrangement } from '@ent/common/metering/arrangement';
import type { EvalMeter } from '../../../gateway/src/metering/contract.ts';
import { createEvalMeter } from '../../../gateway/src/metering/meter.ts';
import { GRACE_PERIOD_MS } from '@ent/common/metering/period';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import {
  createAdminContext,
  createTestOrganization,
  ManualClock,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { getArrangement, publishArrangement, saveArrangement } from '@ent/common/metering/arrangement';

const run = promisify(execFile);
const entctlPath = new URL('../../src/cli/entctl.ts', import.meta.url).pathname;

const clock = new ManualClock(Date.parse('2026-05-14T09:30:00.000Z'));
let ctx: AdminTestContext;
let meter: EvalMeter;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  meter = createEvalMeter({
    redis: ctx.redis,
    keys: ctx.app.redisKeys,
    loadArrangement: (organizationId) => getArrangement(ctx.db, organizationId),
  });
});
afterAll(() => ctx.close());
beforeEach(() => clock.set(Date.parse('2026-05-14T09:30:00.000Z')));

const usage = async (org: TestOrganization) => {
  const res = await ctx.app.inject({ method: 'GET', url: '/org/usage/current', headers: org.headers });
  expect(res.statusCode).toBe(200);
  return res.json();
};
const evals = async (org: TestOrganization, times: number) => {
  for (let i = 0; i < times; i++)
    await meter.gate({ organizationId: org.organization_id, subscriberId: 'cus_1', nowMs: clock.now() });
};
const arrange = async (org: TestOrganization, arrangement: Arrangement) => {
  await saveArrangement(ctx.db, org.organization_id, arrangement);
  await publishArrangement(ctx.redis, ctx.app.redisKeys, org.organization_id, arrangement, clock.now());
};

describe('GET /org/usage/current', () => {
  it('reports a new self-serve organization: free, 250,000, blocking, nothing counted', async () => {
    const org = await createTestOrganization(ctx.db, 'Fresh');
    expect(await usage(org)).toEqual({
      gated: true,
      reason: null,
      period: '2026-05',
      count: 0,
      limit: 250_000,
      plan: 'free',
      blocking: true,
      warn: null,
      allowed: true,
      first_over_at: null,
      blocked_at: null,
    });
  });

  it('follows a free organization through 80%, 100%, grace and stop, and resets next month', async () => {
    const org = await createTestOrganization(ctx.db, 'Free');
    await evals(org, 1);
    await meter.addOfflineCount(org.organization_id, 199_999, clock.now());
    expect(await usage(org)).toMatchObject({ count: 200_000, warn: '80', allowed: true });

    await meter.addOfflineCount(org.organization_id, 50_000, clock.now());
    const firstOverAt = new Date(clock.now()).toISOString();
    const blockedAt = new Date(clock.now() + GRACE_PERIOD_MS).toISOString();
    expect(await usage(org)).toMatchObject({
      count: 250_000,
      warn: '100',
      allowed: true,
      first_over_at: firstOverAt,
      blocked_at: blockedAt,
    });

    clock.advance(GRACE_PERIOD_MS);
    expect(await usage(org)).toEqual({
      gated: true,
      reason: null,
      period: '2026-05',
      count: 250_000,
      limit: 250_000,
      plan: 'free',
      blocking: true,
      warn: 'grace',
      allowed: false,
      first_over_at: firstOverAt,
      blocked_at: blockedAt,
    });

    clock.set(Date.parse('2026-06-01T00:00:00.000Z'));
    expect(await usage(org)).toMatchObject({
      period: '2026-06',
      count: 0,
      warn: null,
      allowed: true,
      first_over_at: null,
    });
  });

  it('starts a new grace period when a limit raised above the count is lowered again before any eval', async () => {
    const org = await createTestOrganization(ctx.db, 'Raised and lowered');
    const limited = (evalLimit: number): Arrangement => ({
      plan: 'free',
      evalLimit,
      blocking: true,
      burstPerSecond: 100,
    });
    await arrange(org, limited(3));
    await evals(org, 3);
    const reached = new Date(clock.now()).toISOString();
    expect(await usage(org)).toMatchObject({ first_over_at: reached, warn: '100' });

    clock.advance(24 * 60 * 60 * 1000);
    await arrange(org, limited(100));
    expect(await usage(org)).toMatchObject({ first_over_at: null, warn: null, allowed: true });

    clock.advance(GRACE_PERIOD_MS);
    await arrange(org, limited(3));
    const lowered = clock.now();
    expect(await usage(org)).toMatchObject({
      first_over_at: new Date(lowered).toISOString(),
      blocked_at: new Date(lowered + GRACE_PERIOD_MS).toISOString(),
      warn: '100',
      allowed: true,
    });
    const next = await meter.gate({
      organizationId: org.organization_id,
      subscriberId: 'cus_1',
      nowMs: clock.now(),
    });
    expect(next.outcome).toBe('counted');
  });

  it('reports a non-blocking individual arrangement past its limit: allowed, no blocked_at', async () => {
    const org = await createTestOrganization(ctx.db, 'Partner');
    await arrange(org, { plan: 'partner', evalLimit: 4, blocking: false, burstPerSecond: 100 });
    await evals(org, 6);
    const firstOverAt = new Date(clock.now()).toISOString();
    clock.advance(10 * 24 * 60 * 60 * 1000);
    expect(await usage(org)).toEqual({
      gated: true,
      reason: null,
      period: '2026-05',
      count: 6,
      limit: 4,
      plan: 'partner',
      blocking: false,
      warn: '100',
      allowed: true,
      first_over_at: firstOverAt,
      blocked_at: null,
    });
  });

  it('reports an unlimited organization as not gated, with its count', async () => {
    const org = await createTestOrganization(ctx.db, 'Unlimited');
    await arrange(org, { plan: null, evalLimit: null, blocking: true, burstPerSecond: 500 });
    await evals(org, 3);
    expect(await usage(org)).toEqual({
      gated: false,
      reason: 'unlimited',
      period: '2026-05',
      count: 3,
      limit: null,
      plan: null,
      blocking: false,
      warn: null,
      allowed: true,
      first_over_at: null,
      blocked_at: null,
    });
  });

  it('reports an individual limit with its own plan key', async () => {
    const org = await createTestOrganization(ctx.db, 'Enterprise');
    await arrange(org, { plan: 'enterprise', evalLimit: 10, blocking: true, burstPerSecond: 100 });
    await evals(org, 8);
    expect(await usage(org)).toMatchObject({
      gated: true,
      plan: 'enterprise',
      limit: 10,
      count: 8,
      warn: '80',
      blocking: true,
    });
  });

  it("shows only the calling organization's usage", async () => {
    const busy = await createTestOrganization(ctx.db, 'Busy');
    const quiet = await createTestOrganization(ctx.db, 'Quiet');
    await evals(busy, 2);
    expect((await usage(quiet)).count).toBe(0);
    expect((await usage(busy)).count).toBe(2);
  });

  it('needs the subscribers:read scope', async () => {
    const org = await createTestOrganization(ctx.db, 'Scoped');
    const checkOnly = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    const reader = await createKeyWithScopes(ctx.db, org.organization_id, ['subscribers:read']);
    const get = (key: string) =>
      ctx.app.inject({ method: 'GET', url: '/org/usage/current', headers: { 'x-api-key': key } });
    expect((await get(checkOnly.apiKey)).statusCode).toBe(403);
    expect((await get(reader.apiKey)).statusCode).toBe(200);
    const anonymous = await ctx.app.inject({ method: 'GET', url: '/org/usage/current' });
    expect(anonymous.statusCode).toBe(401);
  });

  it('refuses query parameters with 422', async () => {
    const org = await createTestOrganization(ctx.db, 'Query');
    const res = await ctx.app.inject({
      method: 'GET',
      url: '/org/usage/current?period=2026-01',
      headers: org.headers,
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().error.code).toBe('VALIDATION_ERROR');
  });
});

describe('entctl org arrangement', () => {
  const entctl = async (...args: string[]) => {
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', entctlPath, 'org', 'arrangement', ...args, '--json'],
      {
        env: {
          ...process.env,
          DATABASE_URL: ctx.config.databaseUrl,
          REDIS_URL: ctx.config.redisUrl,
          REDIS_CLUSTER_NODES: ctx.config.redisClusterNodes.join(','),
          REDIS_KEY_PREFIX: ctx.config.redisKeyPrefix,
        },
        timeout: 20_000,
      },
    );
    return JSON.parse(stdout);
  };
  const gate = (org: TestOrganization) =>
    meter.gate({ organizationId: org.organization_id, subscriberId: 'cus_1', nowMs: clock.now() });

  it('changes limit, blocking, burst, plan and unlimited; each applies on the next gate call', async () => {
    const org = await createTestOrganization(ctx.db, 'Operated');
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { limit: 250_000, used: 1 } });

    expect(await entctl('--org', org.organization_id, '--eval-limit', '2', '--non-blocking')).toEqual({
      organization_id: org.organization_id,
      plan: 'free',
      eval_limit: 2,
      blocking: false,
      burst: 100,
      usage_events_per_second: 1000,
    });
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { limit: 2, used: 2, warn: '100' } });
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { limit: 2, used: 3, warn: '100' } });
    expect(await usage(org)).toMatchObject({ plan: 'free', limit: 2, blocking: false, warn: '100' });

    expect(
      await entctl(
        '--org',
        org.organization_id,
        '--burst',
        '1',
        '--plan',
        'enterprise',
        '--blocking',
        '--usage-events-per-second',
        '5',
      ),
    ).toEqual({
      organization_id: org.organization_id,
      plan: 'enterprise',
      eval_limit: 2,
      blocking: true,
      burst: 1,
      usage_events_per_second: 5,
    });
    expect(await ctx.redis.hget(ctx.app.redisKeys.arrangement(org.organization_id), 'usage_eps')).toBe('5');
    clock.advance(1000);
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: { used: 4, warn: 'grace' } });
    expect((await gate(org)).outcome).toBe('rate_limited');

    expect(await entctl('--org', org.organization_id, '--unlimited')).toEqual({
      organization_id: org.organization_id,
      plan: null,
      eval_limit: null,
      // Reported as usage reports it; the stored setting comes back with a limit (below).
      blocking: false,
      burst: 1,
      usage_events_per_second: 5,
    });
    clock.advance(1000);
    expect(await gate(org)).toMatchObject({ outcome: 'counted', usage: null });
    expect(await usage(org)).toMatchObject({
      gated: false,
      reason: 'unlimited',
      plan: null,
      count: 5,
      warn: null,
    });

    expect(
      await entctl('--org', org.organization_id, '--eval-limit', '1000', '--burst', '100'),
    ).toMatchObject({
      plan: 'individual',
      eval_limit: 1000,
      blocking: true,
      burst: 100,
    });
    clock.advance(1000);
    expect(await gate(org)).toMatchObject({
      outcome: 'counted',
      usage: { limit: 1000, used: 6, warn: null },
    });
  }, 90_000);

  it('refuses --eval-limit together with --unlimited, and an unknown organization', async () => {
    const org = await createTestOrganization(ctx.db, 'Refused');
    await expect(entctl('--org', org.organization_id, '--eval-limit', '5', '--unlimited')).rejects.toThrow();
    await expect(entctl('--org', 'org_missing')).rejects.toThrow(/No organization/);
  }, 60_000);

  it.each([
    [['--eval-limit', '99999999999999999999'], /--eval-limit.*whole number/],
    [['--eval-limit', '1.5'], /--eval-limit.*whole number/],
    [['--burst', '0'], /--burst.*whole number from 1/],
    [['--plan', 'Bad Key!'], /--plan.*lowercase letters/],
    [['--plan', ''], /--plan.*lowercase letters/],
  ])(
    'refuses %j with its own message before touching the database, and changes nothing',
    async (args, message) => {
      const org = await createTestOrganization(ctx.db, 'Refused arguments');
      await expect(entctl('--org', org.organization_id, ...args)).rejects.toThrow(message);
      expect(await usage(org)).toMatchObject({ plan: 'free', limit: 250_000, blocking: true });
    },
    60_000,
  );
});
