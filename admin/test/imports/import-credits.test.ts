import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rolloverCreditId } from '@ent/common/metering/credits';
import { snapshotStore } from '@ent/common/snapshots/store';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { ndjson, refusals, runImport } from './run-import.ts';

/** Credit lines of POST /org/imports (issue 36): upserted by credit_id, refused per line as the POST refuses. */
let ctx: AdminTestContext;

const DAY = 86_400_000;
const NOW = Date.now();
const iso = (ms: number) => new Date(ms).toISOString();

const CATALOG = [
  { type: 'feature', key: 'calls', name: 'Calls', kind: 'metered' },
  { type: 'feature', key: 'seats', name: 'Seats', kind: 'limit' },
  { type: 'subscriber', subscriber_id: 'alice' },
  { type: 'subscriber', subscriber_id: 'bob' },
];

const credit = (fields: Record<string, unknown>) => ({
  type: 'credit',
  subscriber_id: 'alice',
  feature: 'calls',
  amount: 10,
  ...fields,
});

beforeAll(async () => {
  // Batches of 3 lines: the tests cross batch boundaries.
  ctx = await createAdminContext({ imports: { runner: { batchSize: 3 } } });
});
afterAll(() => ctx.close());

async function orgWithCatalog(): Promise<TestOrganization> {
  const org = await createTestOrganization(ctx.db);
  expect(await runImport(ctx, org, ndjson(CATALOG))).toMatchObject({ status: 'succeeded', failed: 0 });
  return org;
}

const spentInRedis = (org: TestOrganization, subscriberId: string) =>
  ctx.redis.hgetall(ctx.app.redisKeys.creditSpent(org.organization_id, subscriberId, 'calls'));

describe('credit lines', () => {
  it('creates credits with their spent figure, publishes them, and leaves an equal line unchanged', async () => {
    const org = await orgWithCatalog();
    const body = ndjson([
      credit({ credit_id: 'cr_dup', amount: 1 }),
      credit({ credit_id: 'cr_dup', amount: 3, subscriber_id: 'bob' }),
      credit({
        credit_id: 'cr_promo',
        amount: 5,
        spent: 2,
        priority: 1,
        name: 'Promo',
        expires_at: iso(NOW + DAY),
      }),
      credit({ credit_id: 'cr_topup', amount: 50 }),
    ]);
    expect(await runImport(ctx, org, body)).toMatchObject({ status: 'succeeded', applied: 4, failed: 0 });

    const list = await ctx.app.inject({
      method: 'GET',
      url: '/org/subscribers/alice/credits',
      headers: org.headers,
    });
    const byId = new Map(list.json().credits.map((c: { credit_id: string }) => [c.credit_id, c]));
    expect(byId.get('cr_promo')).toMatchObject({
      amount: 5,
      spent: 2,
      remaining: 3,
      priority: 1,
      name: 'Promo',
      source: 'manual',
      status: 'active',
    });
    expect(byId.get('cr_topup')).toMatchObject({ amount: 50, spent: 0, priority: 10, expires_at: null });
    // Several lines of one id in a batch: the last wins (in a later batch it would be refused: credits do not change).
    const bob = await ctx.app.inject({
      method: 'GET',
      url: '/org/subscribers/bob/credits',
      headers: org.headers,
    });
    expect(bob.json().credits).toMatchObject([{ credit_id: 'cr_dup', amount: 3 }]);

    // Where the gateway spends from, before the import said succeeded.
    expect(await spentInRedis(org, 'alice')).toEqual({ cr_promo: '2', cr_topup: '0' });
    const store = snapshotStore(ctx.redis, ctx.app.redisKeys);
    const doc = (await store.readSubscriber(org.organization_id, 'alice'))?.doc;
    expect(doc?.credits?.calls?.map((c) => c.id).sort()).toEqual(['cr_promo', 'cr_topup']);

    // Equal lines again: unchanged, whatever spent says (gateways move it now).
    const again = await runImport(
      ctx,
      org,
      ndjson([
        credit({ credit_id: 'cr_promo', amount: 5, spent: 0 }),
        credit({ credit_id: 'cr_topup', amount: 50 }),
      ]),
    );
    expect(again).toMatchObject({ status: 'succeeded', applied: 0, unchanged: 2, failed: 0 });
    expect(await spentInRedis(org, 'alice')).toEqual({ cr_promo: '2', cr_topup: '0' });
  });

  it('refuses each bad line alone, with the error the POST would answer or the import adds', async () => {
    const org = await orgWithCatalog();
    const voided = credit({ credit_id: 'cr_voided', amount: 2 });
    const kept = credit({ credit_id: 'cr_kept', amount: 2 });
    expect(await runImport(ctx, org, ndjson([voided, kept]))).toMatchObject({ applied: 2 });
    const deleted = await ctx.app.inject({
      method: 'DELETE',
      url: '/org/subscribers/alice/credits/cr_voided',
      headers: org.headers,
    });
    expect(deleted.statusCode).toBe(200);
    const start = Date.UTC(2026, 9, 1);
    const done = await runImport(
      ctx,
      org,
      ndjson([
        credit({ credit_id: 'cr_1', subscriber_id: 'ghost' }),
        credit({ credit_id: 'cr_2', feature: 'nope' }),
        credit({ credit_id: 'cr_3', feature: 'seats' }),
        credit({ credit_id: 'cr_4', spent: 11 }),
        credit({ credit_id: 'cr_5', effective_at: iso(NOW), expires_at: iso(NOW) }),
        credit({ credit_id: 'cr_6', amount: 0 }),
        credit({ credit_id: 'not-a-credit-id' }),
        credit({ credit_id: 'cr_8', source: 'rollover' }),
        credit({
          credit_id: 'cr_9',
          source: 'rollover',
          effective_at: iso(start),
          source_period_start: iso(start - DAY),
        }),
        credit({ credit_id: 'cr_10', source_period_start: iso(start) }),
        credit({
          credit_id: rolloverCreditId('alice', 'calls', start),
          source: 'rollover',
          effective_at: iso(start),
          source_period_start: iso(start),
        }),
        credit({ credit_id: 'cr_kept', amount: 3 }),
        voided,
        credit({ type: 'credit' }),
      ]),
    );
    expect(done).toMatchObject({ status: 'succeeded', lines: 14, applied: 0, failed: 14 });
    expect(refusals(done)).toEqual([
      [1, 'NOT_FOUND', 'subscriber_id'],
      [2, 'VALIDATION_ERROR', 'feature'],
      [3, 'VALIDATION_ERROR', 'feature'],
      [4, 'VALIDATION_ERROR', 'spent'],
      [5, 'VALIDATION_ERROR', 'expires_at'],
      [6, 'VALIDATION_ERROR', 'amount'],
      [7, 'VALIDATION_ERROR', 'credit_id'],
      [8, 'VALIDATION_ERROR', 'source_period_start'],
      [9, 'VALIDATION_ERROR', 'credit_id'],
      [10, 'VALIDATION_ERROR', 'source_period_start'],
      [11, 'VALIDATION_ERROR', 'source_period_start'],
      [12, 'CONFLICT', 'amount'],
      [13, 'CONFLICT', 'credit_id'],
      [14, 'VALIDATION_ERROR', 'credit_id'],
    ]);
  });

  it('imports a rollover under its gateway id, and refuses a second one of the same period', async () => {
    const org = await orgWithCatalog();
    const start = Date.UTC(2026, 9, 1);
    const next = Date.UTC(2026, 10, 1);
    const rollover = (effective: number) =>
      credit({
        credit_id: rolloverCreditId('alice', 'calls', effective),
        amount: 4,
        spent: 1,
        source: 'rollover',
        effective_at: iso(effective),
        expires_at: iso(next + 30 * DAY),
        source_period_start: iso(start - 30 * DAY),
        created_at: iso(effective),
      });
    const done = await runImport(ctx, org, ndjson([rollover(start), rollover(start + DAY)]));
    expect(done).toMatchObject({ applied: 1, failed: 1 });
    expect(refusals(done)).toEqual([[2, 'CONFLICT', 'source_period_start']]);
    const list = await ctx.app.inject({
      method: 'GET',
      url: '/org/subscribers/alice/credits',
      headers: org.headers,
    });
    expect(list.json().credits).toMatchObject([
      {
        credit_id: rolloverCreditId('alice', 'calls', start),
        source: 'rollover',
        spent: 1,
        effective_at: iso(start),
        created_at: iso(start),
      },
    ]);
  });

  it('refuses the credit past the live cap of a subscriber and feature, as the POST does', async () => {
    const org = await orgWithCatalog();
    const lines = Array.from({ length: 101 }, (_, i) => credit({ credit_id: `cr_cap_${i}`, amount: 1 }));
    // An expired credit does not count toward the cap.
    lines.unshift(
      credit({ credit_id: 'cr_old', effective_at: iso(NOW - 2 * DAY), expires_at: iso(NOW - DAY) }),
    );
    const done = await runImport(ctx, org, ndjson(lines));
    expect(done).toMatchObject({ applied: 101, failed: 1 });
    expect(refusals(done)).toEqual([[102, 'VALIDATION_ERROR', 'feature']]);
  });

  it('writes nothing on a dry run, in Postgres or Redis', async () => {
    const org = await orgWithCatalog();
    const done = await runImport(
      ctx,
      org,
      ndjson([credit({ credit_id: 'cr_dry', spent: 4 })]),
      '?dry_run=true',
    );
    expect(done).toMatchObject({ status: 'succeeded', dry_run: true, applied: 1 });
    expect(await spentInRedis(org, 'alice')).toEqual({});
    const list = await ctx.app.inject({
      method: 'GET',
      url: '/org/subscribers/alice/credits',
      headers: org.headers,
    });
    expect(list.json().credits).toEqual([]);
  });
});
