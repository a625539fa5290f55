import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meteredMember } from '@ent/common/redis/keys';
import { freePort } from '../../../gateway/test/processes.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

/** `entctl usage show` as a process against this file's database and Redis prefix. */
const run = promisify(execFile);
const entctlPath = new URL('../../src/cli/entctl.ts', import.meta.url).pathname;

let ctx: AdminTestContext;
let org: TestOrganization;
const now = new Date();
const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
const nextMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString();

const entctl = (args: string[], env: Record<string, string> = {}) =>
  run(process.execPath, ['--import', 'tsx', entctlPath, 'usage', ...args], {
    env: {
      ...process.env,
      DATABASE_URL: ctx.config.databaseUrl,
      REDIS_URL: ctx.config.redisUrl,
      REDIS_CLUSTER_NODES: ctx.config.redisClusterNodes.join(','),
      REDIS_KEY_PREFIX: ctx.config.redisKeyPrefix,
      ...env,
    },
    timeout: 30_000,
  });

async function write(method: 'POST' | 'PUT', url: string, payload: unknown) {
  const res = await ctx.app.inject({ method, url, headers: org.headers, payload: payload as object });
  expect(res.statusCode, res.body).toBeLessThan(300);
}

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Metered by entctl');
  await write('POST', '/org/features', { key: 'api_calls', name: 'API calls', kind: 'metered' });
  await write('POST', '/org/features', { key: 'seats', name: 'Seats', kind: 'metered' });
  await write('POST', '/org/features', { key: 'exports', name: 'Exports', kind: 'metered' });
  await write('POST', '/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });
  await write('POST', '/org/plans', {
    key: 'team',
    name: 'Team',
    kind: 'catalog',
    grants: [
      { feature: 'api_calls', kind: 'metered', limit: 100 },
      { feature: 'seats', kind: 'metered', limit: 10, reset: 'never' },
      { feature: 'sso', kind: 'flag' },
    ],
  });
  await write('POST', '/org/subscribers', { subscriber_id: 'cust_7', name: 'Umbrella' });
  await write('POST', '/org/subscribers/cust_7/subscriptions', { plan_id: 'team' });
  // What a gateway's consumes left in Redis (the hot copy), and what the worker persisted of another balance.
  await ctx.redis.hset(
    ctx.app.redisKeys.meteredBalance(org.organization_id, meteredMember('cust_7', 'api_calls', monthStart)),
    { u: '42', r: '3', e: String(Date.parse(nextMonth)) },
  );
  await ctx.db
    .insertInto('metered_usage')
    .values({
      organization_id: org.organization_id,
      subscriber_id: 'cust_7',
      feature_key: 'seats',
      period_start: new Date(0),
      period_end: null,
      used: 7,
      revision: 2,
    })
    .execute();
}, 60_000);

afterAll(() => ctx?.close());

describe('entctl usage show', () => {
  it("prints every metered feature's current period: Redis's figure, else Postgres's, else 0", async () => {
    const { stdout } = await entctl([
      'show',
      '--org',
      org.organization_id,
      '--subscriber',
      'cust_7',
      '--json',
    ]);
    expect(JSON.parse(stdout)).toEqual({
      subscriber_id: 'cust_7',
      usage: [
        {
          feature: 'api_calls',
          kind: 'metered',
          limit: 100,
          used: 42,
          remaining: 58,
          allowed: true,
          period_start: new Date(monthStart).toISOString(),
          resets_at: nextMonth,
          source: 'plan',
          credits: [],
        },
        {
          feature: 'exports',
          kind: 'metered',
          limit: 0,
          used: 0,
          remaining: 0,
          allowed: false,
          period_start: new Date(monthStart).toISOString(),
          resets_at: nextMonth,
          source: 'none',
          credits: [],
        },
        {
          feature: 'seats',
          kind: 'metered',
          limit: 10,
          used: 7,
          remaining: 3,
          allowed: true,
          period_start: '1970-01-01T00:00:00.000Z',
          resets_at: null,
          source: 'plan',
          credits: [],
        },
      ],
    });
  }, 60_000);

  it('prints a table for people', async () => {
    const { stdout } = await entctl(['show', '--org', org.organization_id, '--subscriber', 'cust_7']);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('subscriber cust_7');
    expect(lines[1]).toMatch(/^feature\s+used\s+limit\s+remaining\s+resets_at\s+source$/);
    expect(lines[2]).toMatch(
      new RegExp(`^api_calls\\s+42\\s+100\\s+58\\s+${nextMonth.replace(/\./g, '\\.')}\\s+plan$`),
    );
    expect(lines[4]).toMatch(/^seats\s+7\s+10\s+3\s+never\s+plan$/);
  }, 60_000);

  it("says so and answers Postgres's figures when Redis cannot be reached", async () => {
    const { stdout, stderr } = await entctl(
      ['show', '--org', org.organization_id, '--subscriber', 'cust_7', '--json'],
      {
        REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
        REDIS_CLUSTER_NODES: '',
        REDIS_COMMAND_TIMEOUT_MS: '300',
      },
    );
    expect(stderr).toContain('Redis could not be reached: figures from Postgres');
    const used = (JSON.parse(stdout) as { usage: { feature: string; used: number }[] }).usage.map((entry) => [
      entry.feature,
      entry.used,
    ]);
    expect(used).toEqual([
      ['api_calls', 0],
      ['exports', 0],
      ['seats', 7],
    ]);
  }, 60_000);

  it('refuses an unknown subscriber with its own message', async () => {
    await expect(
      entctl(['show', '--org', org.organization_id, '--subscriber', 'nobody', '--json']),
    ).rejects.toThrow(/No subscriber "nobody"/);
  }, 60_000);
});

describe('entctl usage set', () => {
  it('corrects the current period as PUT .../usage/{feature} does, audited from -> to as the admin service account', async () => {
    const { stdout } = await entctl([
      'set',
      '--org',
      org.organization_id,
      '--subscriber',
      'cust_7',
      '--feature',
      'api_calls',
      '--used',
      '5',
      '--json',
    ]);
    expect(JSON.parse(stdout)).toMatchObject({ feature: 'api_calls', used: 5, remaining: 95, limit: 100 });
    const shown = await entctl(['show', '--org', org.organization_id, '--subscriber', 'cust_7', '--json']);
    expect(JSON.parse(shown.stdout).usage[0]).toMatchObject({ feature: 'api_calls', used: 5 });
    const audit = await ctx.app.inject({
      method: 'GET',
      url: '/org/audit-events?limit=1',
      headers: org.headers,
    });
    expect(audit.json().audit_events[0]).toMatchObject({
      method: 'PUT',
      route: '/org/subscribers/{subscriber_id}/usage/{feature}',
      params: { subscriber_id: 'cust_7', feature: 'api_calls' },
      user_agent: 'entctl',
      outcome: 'responded',
      status: 200,
      details: { used: { from: 42, to: 5 } },
    });
  }, 60_000);

  it('refuses a feature that is not metered and a negative figure, changing nothing', async () => {
    await expect(
      entctl([
        'set',
        '--org',
        org.organization_id,
        '--subscriber',
        'cust_7',
        '--feature',
        'sso',
        '--used',
        '1',
      ]),
    ).rejects.toThrow(/not a metered one/);
    await expect(
      entctl([
        'set',
        '--org',
        org.organization_id,
        '--subscriber',
        'cust_7',
        '--feature',
        'seats',
        '--used',
        '-1',
      ]),
    ).rejects.toThrow(/--used/);
    const shown = await entctl(['show', '--org', org.organization_id, '--subscriber', 'cust_7', '--json']);
    expect(JSON.parse(shown.stdout).usage[2]).toMatchObject({ feature: 'seats', used: 7 });
  }, 60_000);
});
