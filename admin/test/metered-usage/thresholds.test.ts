import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meteredPeriodAt } from '@ent/common/metering/metered-period';
import {
  createAdminContext,
  createTestOrganization,
  ManualClock,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { meteredPersisterDeps } from '../../../test-support/metered-persister.ts';
import { caller } from '../../../test-support/identity-context.ts';
import {
  createMeteredPersister,
  type MeteredPersisterDeps,
} from '../../src/features/metered-usage/persister.ts';
import { thresholdsReached } from '../../src/features/metered-usage/thresholds.ts';
import { changeBalance, meteredSubscriber } from './balances.ts';

const NOVEMBER_15 = Date.UTC(2026, 10, 15, 12);
const DECEMBER_3 = Date.UTC(2026, 11, 3, 9);

let ctx: AdminTestContext;
let deps: MeteredPersisterDeps;
const clock = new ManualClock(NOVEMBER_15);

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  deps = meteredPersisterDeps(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

/** An organization with a webhook, and alice on a plan granting `api-calls` with this limit per calendar month. */
async function organization(name: string, limit: number | null): Promise<TestOrganization> {
  const org = await createTestOrganization(ctx.db, name);
  const webhook = await caller(ctx, org.api_key).put('/org/webhook', { url: 'http://127.0.0.1:9/hooks' });
  expect(webhook.statusCode).toBe(201);
  await meteredSubscriber(ctx, org, { subscriberId: 'alice', feature: 'api-calls', limit });
  return org;
}

let revision = 0;
/** alice's balance in the month containing `atMs` is now `used`; then one persisting pass at the clock's time. */
async function useAndPersist(org: TestOrganization, atMs: number, used: number): Promise<void> {
  const { startMs, endMs } = meteredPeriodAt('month', null, atMs);
  revision += 1;
  await changeBalance(
    ctx.redis,
    ctx.app.redisKeys,
    org.organization_id,
    { subscriberId: 'alice', feature: 'api-calls', periodStartMs: startMs, periodEndMs: endMs },
    { used, revision },
  );
  const result = await createMeteredPersister(deps).persistOnce();
  expect(result.failed).toBe(0);
}

/** The threshold events recorded for the organization's webhook, oldest first: their data. */
async function thresholdEvents(org: TestOrganization): Promise<Record<string, unknown>[]> {
  const rows = await ctx.db
    .selectFrom('webhook_deliveries')
    .select(['event_type', 'payload'])
    .where('organization_id', '=', org.organization_id)
    .where('event_type', '=', 'usage.threshold_reached')
    .orderBy('id')
    .execute();
  return rows.map((row) => {
    const payload = (typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload) as {
      type: string;
      data: Record<string, unknown>;
    };
    expect(payload.type).toBe('usage.threshold_reached');
    return payload.data;
  });
}

describe('thresholdsReached', () => {
  it.each([
    [0, 100, []],
    [79, 100, []],
    [80, 100, [80]],
    [99, 100, [80]],
    [100, 100, [80, 100]],
    [250, 100, [80, 100]],
    [4, 5, [80]],
    [3, 5, []],
    [1, 1, [80, 100]],
    [0, 0, []],
    [1, 0, [80, 100]],
    [1_000_000_000_000, null, []],
  ] as const)('used %d of %s reaches %j', (used, limit, expected) => {
    expect(thresholdsReached(used, limit)).toEqual(expected);
  });
});

describe('usage.threshold_reached', () => {
  it('fires once per threshold and period: 80, then 100, then again in the next period', async () => {
    clock.set(NOVEMBER_15);
    const org = await organization('Thresholds', 100);
    const november = new Date(Date.UTC(2026, 10, 1)).toISOString();
    const december = new Date(Date.UTC(2026, 11, 1)).toISOString();
    const event = (threshold: number, used: number, periodStart: string) => ({
      subscriber_id: 'alice',
      feature: 'api-calls',
      threshold,
      used,
      limit: 100,
      period_start: periodStart,
    });

    await useAndPersist(org, NOVEMBER_15, 79);
    expect(await thresholdEvents(org)).toEqual([]);

    await useAndPersist(org, NOVEMBER_15, 85);
    expect(await thresholdEvents(org)).toEqual([event(80, 85, november)]);

    await useAndPersist(org, NOVEMBER_15, 90);
    await useAndPersist(org, NOVEMBER_15, 60);
    await useAndPersist(org, NOVEMBER_15, 95);
    expect(await thresholdEvents(org)).toHaveLength(1);

    await useAndPersist(org, NOVEMBER_15, 100);
    await useAndPersist(org, NOVEMBER_15, 140);
    expect(await thresholdEvents(org)).toEqual([event(80, 85, november), event(100, 100, november)]);

    clock.set(DECEMBER_3);
    await useAndPersist(org, DECEMBER_3, 81);
    await useAndPersist(org, DECEMBER_3, 82);
    expect(await thresholdEvents(org)).toEqual([
      event(80, 85, november),
      event(100, 100, november),
      event(80, 81, december),
    ]);
  });

  it('a balance persisted after its period ended still reaches its thresholds in that period', async () => {
    clock.set(DECEMBER_3);
    const org = await organization('Late', 100);
    await useAndPersist(org, NOVEMBER_15, 120);
    expect(await thresholdEvents(org)).toEqual([
      expect.objectContaining({ threshold: 80, used: 120, period_start: '2026-11-01T00:00:00.000Z' }),
      expect.objectContaining({ threshold: 100, used: 120, period_start: '2026-11-01T00:00:00.000Z' }),
    ]);
  });

  it('an unlimited balance never reaches a threshold', async () => {
    clock.set(NOVEMBER_15);
    const org = await organization('Unlimited', null);
    await useAndPersist(org, NOVEMBER_15, 1_000_000);
    expect(await thresholdEvents(org)).toEqual([]);
  });

  it('one persister across passes decides by the current terms: an override lowering the limit counts at once', async () => {
    clock.set(NOVEMBER_15);
    const org = await organization('Kept documents', 100);
    const persister = createMeteredPersister(deps);
    const { startMs, endMs } = meteredPeriodAt('month', null, NOVEMBER_15);
    const change = async (used: number) => {
      revision += 1;
      await changeBalance(
        ctx.redis,
        ctx.app.redisKeys,
        org.organization_id,
        { subscriberId: 'alice', feature: 'api-calls', periodStartMs: startMs, periodEndMs: endMs },
        { used, revision },
      );
      expect((await persister.persistOnce()).failed).toBe(0);
    };
    await change(50);
    expect(await thresholdEvents(org)).toEqual([]);
    const lowered = await caller(ctx, org.api_key).put('/org/subscribers/alice/overrides/api-calls', {
      kind: 'metered',
      limit: 60,
    });
    expect(lowered.statusCode).toBeLessThan(300);
    await change(51);
    expect(await thresholdEvents(org)).toEqual([
      expect.objectContaining({ threshold: 80, used: 51, limit: 60 }),
    ]);
  });

  it('is recorded once even when the webhook is disabled, and not sent later', async () => {
    clock.set(NOVEMBER_15);
    const org = await organization('Disabled', 10);
    const api = caller(ctx, org.api_key);
    expect((await api.post('/org/webhook/disable')).statusCode).toBe(200);
    await useAndPersist(org, NOVEMBER_15, 9);
    expect((await api.post('/org/webhook/enable')).statusCode).toBe(200);
    await useAndPersist(org, NOVEMBER_15, 9);
    await useAndPersist(org, NOVEMBER_15, 10);
    expect(await thresholdEvents(org)).toEqual([
      expect.objectContaining({ threshold: 100, used: 10, limit: 10 }),
    ]);
  });
});
