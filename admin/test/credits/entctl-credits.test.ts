import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

/** `entctl credits` as a process against this file's database and Redis prefix. */
const run = promisify(execFile);
const entctlPath = new URL('../../src/cli/entctl.ts', import.meta.url).pathname;

let ctx: AdminTestContext;
let org: TestOrganization;

const entctl = (args: string[]) =>
  run(process.execPath, ['--import', 'tsx', entctlPath, 'credits', ...args, '--org', org.organization_id], {
    env: {
      ...process.env,
      DATABASE_URL: ctx.config.databaseUrl,
      REDIS_URL: ctx.config.redisUrl,
      REDIS_CLUSTER_NODES: ctx.config.redisClusterNodes.join(','),
      REDIS_KEY_PREFIX: ctx.config.redisKeyPrefix,
    },
    timeout: 30_000,
  });

async function write(url: string, payload: unknown) {
  const res = await ctx.app.inject({ method: 'POST', url, headers: org.headers, payload: payload as object });
  expect(res.statusCode, res.body).toBeLessThan(300);
}

const lastAudit = async () =>
  (await ctx.app.inject({ method: 'GET', url: '/org/audit-events?limit=1', headers: org.headers })).json()
    .audit_events[0];

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Credits by entctl');
  await write('/org/features', { key: 'api_calls', name: 'API calls', kind: 'metered' });
  await write('/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });
  await write('/org/subscribers', { subscriber_id: 'cust_7', name: 'Umbrella' });
}, 60_000);

afterAll(() => ctx?.close());

describe('entctl credits', () => {
  let creditId = '';

  it('adds a credit as the route does, audited as the admin service account, and the API lists it', async () => {
    const { stdout } = await entctl([
      'add',
      '--subscriber',
      'cust_7',
      '--feature',
      'api_calls',
      '--amount',
      '500',
      '--expires-at',
      '2999-01-01T00:00:00Z',
      '--name',
      'Top-up 17',
      '--json',
    ]);
    const credit = JSON.parse(stdout) as { credit_id: string };
    expect(credit).toMatchObject({
      subscriber_id: 'cust_7',
      feature: 'api_calls',
      amount: 500,
      remaining: 500,
      priority: 10,
      expires_at: '2999-01-01T00:00:00.000Z',
      status: 'active',
      source: 'manual',
      name: 'Top-up 17',
    });
    creditId = credit.credit_id;
    expect(await lastAudit()).toMatchObject({
      method: 'POST',
      route: '/org/subscribers/{subscriber_id}/credits',
      user_agent: 'entctl',
      status: 201,
      details: { credit_id: creditId, amount: 500 },
    });
    const listed = await ctx.app.inject({
      method: 'GET',
      url: '/org/subscribers/cust_7/credits',
      headers: org.headers,
    });
    expect(listed.json().credits).toEqual([credit]);
  }, 60_000);

  it('lists them as a table for people', async () => {
    const { stdout } = await entctl(['list', '--subscriber', 'cust_7']);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('subscriber cust_7');
    expect(lines[1]).toMatch(
      /^credit_id\s+feature\s+remaining\s+amount\s+priority\s+expires_at\s+status\s+name$/,
    );
    expect(lines[2]).toMatch(
      new RegExp(
        `^${creditId}\\s+api_calls\\s+500\\s+500\\s+10\\s+2999-01-01T00:00:00\\.000Z\\s+active\\s+Top-up 17$`,
      ),
    );
  }, 60_000);

  it('refuses what the route refuses, with its sentence', async () => {
    await expect(
      entctl(['add', '--subscriber', 'cust_7', '--feature', 'sso', '--amount', '5']),
    ).rejects.toThrow(/credits are for metered features only/);
    await expect(
      entctl(['add', '--subscriber', 'cust_7', '--feature', 'api_calls', '--amount', '0']),
    ).rejects.toThrow(/must be a whole number from 1/);
    // The body's own rules, as the route's schema has them (found by a probe: entctl made these credits, and an
    // export of them could not be imported).
    const add = ['add', '--subscriber', 'cust_7', '--feature', 'api_calls', '--amount', '5'];
    const before = await ctx.db
      .selectFrom('credits')
      .select('id')
      .where('organization_id', '=', org.organization_id)
      .execute();
    await expect(entctl([...add, '--name', ''])).rejects.toThrow(
      /name must NOT have fewer than 1 characters/,
    );
    await expect(entctl([...add, '--name', 'x'.repeat(256)])).rejects.toThrow(
      /name must NOT have more than 255/,
    );
    // Without an offset it would be read in this machine's zone.
    await expect(entctl([...add, '--expires-at', '2030-01-01T00:00:00'])).rejects.toThrow(
      /expires_at must be an RFC 3339/,
    );
    await expect(entctl([...add, '--expires-at', '2030-01-01'])).rejects.toThrow(
      /expires_at must be an RFC 3339/,
    );
    const after = await ctx.db
      .selectFrom('credits')
      .select('id')
      .where('organization_id', '=', org.organization_id)
      .execute();
    expect(after).toEqual(before);
  }, 60_000);

  it('voids it once: a second void changes nothing and is answered the same', async () => {
    const voided = JSON.parse(
      (await entctl(['void', '--subscriber', 'cust_7', '--credit', creditId, '--json'])).stdout,
    ) as { status: string; remaining: number; voided_at: string };
    expect(voided).toMatchObject({ status: 'voided', remaining: 0 });
    expect(await lastAudit()).toMatchObject({
      method: 'DELETE',
      route: '/org/subscribers/{subscriber_id}/credits/{credit_id}',
      user_agent: 'entctl',
      status: 200,
      details: { credit_id: creditId },
    });
    const again = JSON.parse(
      (await entctl(['void', '--subscriber', 'cust_7', '--credit', creditId, '--json'])).stdout,
    ) as unknown;
    expect(again).toEqual(voided);
    const listed = await entctl(['list', '--subscriber', 'cust_7', '--status', 'voided', '--json']);
    expect(JSON.parse(listed.stdout)).toEqual({ credits: [voided] });
  }, 60_000);
});
