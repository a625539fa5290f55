import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '@ent/common/db/connect';
import { meteredPeriodAt } from '@ent/common/metering/metered-period';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { meteredPersisterDeps } from '../../../test-support/metered-persister.ts';
import {
  createMeteredPersister,
  startMeteredPersister,
  type MeteredPersisterDeps,
} from '../../src/features/metered-usage/persister.ts';
import { changeBalance, meteredSubscriber, persistedRow } from './balances.ts';

let ctx: AdminTestContext;
let deps: MeteredPersisterDeps;
const logged: string[] = [];

beforeAll(async () => {
  ctx = await createAdminContext();
  deps = meteredPersisterDeps(ctx, {
    warn: (message) => logged.push(message),
    error: (message) => logged.push(message),
  });
});
afterAll(async () => {
  await ctx?.close();
});

const month = () => meteredPeriodAt('month', null, ctx.clock.now());

async function organizationWithFeature(name: string, limit: number | null = 100): Promise<TestOrganization> {
  const org = await createTestOrganization(ctx.db, name);
  await meteredSubscriber(ctx, org, { subscriberId: 'alice', feature: 'api-calls', limit });
  return org;
}

const balanceOf = (subscriberId: string) => {
  const { startMs, endMs } = month();
  return { subscriberId, feature: 'api-calls', periodStartMs: startMs, periodEndMs: endMs };
};

const dirtyMembers = (org: TestOrganization) =>
  ctx.redis.smembers(ctx.app.redisKeys.meteredDirty(org.organization_id));
const dirtyOrganizations = () => ctx.redis.smembers(ctx.app.redisKeys.meteredDirtyOrganizations);

async function until<T>(probe: () => Promise<T | undefined | false>, what: string): Promise<T> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const value = await probe();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`gave up waiting for ${what}`);
}

describe('the metered usage persister', () => {
  it("persists a change within the worker's loop and takes the organization out of the dirty sets", async () => {
    const org = await organizationWithFeature('Loop');
    const persister = startMeteredPersister(deps);
    try {
      await changeBalance(ctx.redis, ctx.app.redisKeys, org.organization_id, balanceOf('alice'), {
        used: 12,
        revision: 3,
      });
      const row = await until(
        () => persistedRow(ctx, org.organization_id, 'alice', 'api-calls', month().startMs),
        'the balance in metered_usage',
      );
      expect(row).toEqual({ used: 12, revision: 3, period_end: new Date(month().endMs!) });
      await until(
        async () => !(await dirtyOrganizations()).includes(org.organization_id),
        'the organization to leave mdirty-orgs',
      );
      expect(await dirtyMembers(org)).toEqual([]);
    } finally {
      await persister.stop();
    }
  });

  it('never lets an older revision overwrite a newer one', async () => {
    const org = await organizationWithFeature('Revisions', null);
    const persister = createMeteredPersister(deps);
    const change = (used: number, revision: number) =>
      changeBalance(ctx.redis, ctx.app.redisKeys, org.organization_id, balanceOf('alice'), {
        used,
        revision,
      });
    const row = () => persistedRow(ctx, org.organization_id, 'alice', 'api-calls', month().startMs);

    await change(50, 5);
    await persister.persistOnce();
    expect(await row()).toMatchObject({ used: 50, revision: 5 });

    await change(10, 3);
    await persister.persistOnce();
    expect(await row()).toMatchObject({ used: 50, revision: 5 });

    await change(10, 5);
    await persister.persistOnce();
    expect(await row()).toMatchObject({ used: 50, revision: 5 });

    await change(7, 6);
    await persister.persistOnce();
    expect(await row()).toMatchObject({ used: 7, revision: 6 });
  });

  it('a never-reset balance is kept with no period end', async () => {
    const org = await organizationWithFeature('Never', null);
    await changeBalance(
      ctx.redis,
      ctx.app.redisKeys,
      org.organization_id,
      { subscriberId: 'alice', feature: 'api-calls', periodStartMs: 0, periodEndMs: null },
      { used: 4, revision: 1 },
    );
    await createMeteredPersister(deps).persistOnce();
    expect(await persistedRow(ctx, org.organization_id, 'alice', 'api-calls', 0)).toEqual({
      used: 4,
      revision: 1,
      period_end: null,
    });
  });

  it('puts the members back when the write fails, and a later pass persists them', async () => {
    const org = await organizationWithFeature('Failure');
    const members = [];
    for (const subscriberId of ['alice', 'bob', 'carol'])
      members.push(
        await changeBalance(ctx.redis, ctx.app.redisKeys, org.organization_id, balanceOf(subscriberId), {
          used: 5,
          revision: 1,
        }),
      );
    // A Postgres nobody listens on: the write fails after the drain has taken the members.
    const unreachable = createDb('postgres://nobody@127.0.0.1:1/none', { connectionTimeoutMillis: 500 });
    try {
      const result = await createMeteredPersister({ ...deps, db: unreachable }).persistOnce();
      expect(result.failed).toBeGreaterThanOrEqual(1);
    } finally {
      await unreachable.destroy();
    }
    expect((await dirtyMembers(org)).sort()).toEqual(members.sort());
    expect(await dirtyOrganizations()).toContain(org.organization_id);
    expect(
      await persistedRow(ctx, org.organization_id, 'alice', 'api-calls', month().startMs),
    ).toBeUndefined();

    await createMeteredPersister(deps).persistOnce();
    for (const subscriberId of ['alice', 'bob', 'carol'])
      expect(
        await persistedRow(ctx, org.organization_id, subscriberId, 'api-calls', month().startMs),
      ).toMatchObject({
        used: 5,
        revision: 1,
      });
    expect(await dirtyMembers(org)).toEqual([]);
  });

  it('two persisters draining at once, while balances keep changing, lose nothing', async () => {
    const org = await organizationWithFeature('Concurrent', null);
    const subscribers = Array.from({ length: 120 }, (_, i) => `s${String(i).padStart(3, '0')}`);
    const figures = new Map<string, { used: number; revision: number }>();
    const change = async (subscriberId: string) => {
      const previous = figures.get(subscriberId) ?? { used: 0, revision: 0 };
      const next = { used: previous.used + 1 + (previous.revision % 3), revision: previous.revision + 1 };
      figures.set(subscriberId, next);
      await changeBalance(ctx.redis, ctx.app.redisKeys, org.organization_id, balanceOf(subscriberId), next);
    };
    for (const subscriberId of subscribers) await change(subscriberId);

    const first = createMeteredPersister(deps, { batchSize: 7 });
    const second = createMeteredPersister(deps, { batchSize: 11 });
    let writing = true;
    const writer = (async () => {
      let round = 0;
      while (writing && round < 2000) {
        await change(subscribers[round % subscribers.length]!);
        round += 1;
      }
    })();
    const passes = [];
    for (let pass = 0; pass < 5; pass++) passes.push(first.persistOnce(), second.persistOnce());
    const results = await Promise.all(passes);
    writing = false;
    await writer;
    expect(logged.filter((message) => message.includes(org.organization_id))).toEqual([]);
    expect(results.every((result) => result.failed === 0)).toBe(true);
    await Promise.all([first.persistOnce(), second.persistOnce()]);

    const rows = await ctx.db
      .selectFrom('metered_usage')
      .select(['subscriber_id', 'used', 'revision'])
      .where('organization_id', '=', org.organization_id)
      .execute();
    expect(
      new Map(rows.map((row) => [row.subscriber_id, { used: row.used, revision: row.revision }])),
    ).toEqual(figures);
    expect(await dirtyMembers(org)).toEqual([]);
    expect(await dirtyOrganizations()).not.toContain(org.organization_id);
  });

  it('skips a balance gone from Redis (expired) without failing the others', async () => {
    const org = await organizationWithFeature('Vanished', null);
    const gone = await changeBalance(ctx.redis, ctx.app.redisKeys, org.organization_id, balanceOf('bob'), {
      used: 3,
      revision: 1,
    });
    await ctx.redis.del(ctx.app.redisKeys.meteredBalance(org.organization_id, gone));
    await changeBalance(ctx.redis, ctx.app.redisKeys, org.organization_id, balanceOf('alice'), {
      used: 2,
      revision: 1,
    });
    const result = await createMeteredPersister(deps).persistOnce();
    expect(result.failed).toBe(0);
    expect(await persistedRow(ctx, org.organization_id, 'bob', 'api-calls', month().startMs)).toBeUndefined();
    expect(await persistedRow(ctx, org.organization_id, 'alice', 'api-calls', month().startMs)).toMatchObject(
      {
        used: 2,
      },
    );
    expect(await dirtyMembers(org)).toEqual([]);
  });

  it("admin's metrics count what waits to be persisted", async () => {
    const org = await organizationWithFeature('Metrics', null);
    const metric = async (name: string) => {
      const text = await ctx.app.metrics.registry.metrics();
      const line = text.split('\n').find((l) => l.startsWith(`${name} `));
      return line === undefined ? undefined : Number(line.split(' ')[1]);
    };
    await createMeteredPersister(deps).persistOnce();
    expect(await metric('metered_dirty_organizations')).toBe(0);
    for (const subscriberId of ['alice', 'bob'])
      await changeBalance(ctx.redis, ctx.app.redisKeys, org.organization_id, balanceOf(subscriberId), {
        used: 1,
        revision: 1,
      });
    expect(await metric('metered_dirty_organizations')).toBe(1);
    expect(await metric('metered_dirty_balances')).toBe(2);
    await createMeteredPersister(deps).persistOnce();
    expect(await metric('metered_dirty_organizations')).toBe(0);
    expect(await metric('metered_dirty_balances')).toBe(0);
  });
});
