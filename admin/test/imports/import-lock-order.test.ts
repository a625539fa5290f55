import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '@ent/common/db/database';
import type { ImportRecordLine } from '@ent/contract/import-lines';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import {
  heldElsewhere,
  pidOf,
  someoneBlockedBy,
  startBlockedBy,
  type Outcome,
} from '../../../test-support/lock-waits.ts';
import { applyBatch, type BatchOutcome } from '../../src/features/imports/apply-batch.ts';
import { ndjson, runImport } from './run-import.ts';

// An import batch's statements (subscriber lines, subscriptions, overrides in line order, credits) each lock in id
// order, but one after another: a batch could hold cus_c (its subscription) while waiting for cus_b (an override), and
// a writer holding cus_b that then wanted cus_c would deadlock with it. Such a batch locks every subscriber it names
// first, in id order (subscriber-lock-order.ts). Here another transaction holds cus_b; once the batch waits on it, the
// batch must hold cus_a (first in id order) and not cus_c.

let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Import lock order');
  const done = await runImport(
    ctx,
    org,
    ndjson([
      { type: 'feature', key: 'seats', name: 'Seats', kind: 'limit' },
      {
        type: 'plan',
        key: 'pro',
        name: 'Pro',
        kind: 'catalog',
        grants: [{ feature: 'seats', kind: 'limit', limit: 5 }],
      },
      ...['cus_a', 'cus_b', 'cus_c'].map((id) => ({ type: 'subscriber', subscriber_id: id })),
    ]),
  );
  expect(done.status).toBe('succeeded');
});
afterAll(() => ctx.close());

const lockSubscriber = (trx: Transaction<Database>, subscriberId: string) =>
  sql`SELECT 1 FROM subscribers WHERE organization_id = ${org.organization_id} AND subscriber_id = ${subscriberId}
    FOR UPDATE`.execute(trx);

const subscriberHeldElsewhere = (trx: Transaction<Database>, subscriberId: string) =>
  heldElsewhere(
    trx,
    sql`SELECT 1 FROM subscribers WHERE organization_id = ${org.organization_id} AND subscriber_id = ${subscriberId}
      FOR UPDATE NOWAIT`,
  );

describe('an import batch', () => {
  it('locks the subscribers it writes in id order before any of them', async () => {
    const lines: ImportRecordLine[] = [
      { type: 'subscription', subscriber_id: 'cus_c', plan_id: 'pro' },
      { type: 'override', subscriber_id: 'cus_b', feature_key: 'seats', kind: 'limit', limit: 50 },
      { type: 'override', subscriber_id: 'cus_a', feature_key: 'seats', kind: 'limit', limit: 60 },
    ];
    const holder = await ctx.db.startTransaction().execute();
    let holderOpen = true;
    try {
      await lockSubscriber(holder, 'cus_b');
      let outcome: Promise<Outcome<BatchOutcome>>;
      try {
        ({ outcome } = await startBlockedBy(ctx.db, ctx.ownerDb, await pidOf(holder), (trx) =>
          applyBatch(
            trx,
            {
              organizationId: org.organization_id,
              catalogLimits: ctx.config.catalogLimits,
              nowMs: Date.now(),
              relayAfterMs: 30_000,
            },
            lines.map((record, i) => ({ line: i + 1, record })),
          ),
        ));
      } catch (error) {
        await holder.rollback().execute();
        holderOpen = false;
        const ended = await (error as { outcome: Promise<Outcome<BatchOutcome>> }).outcome;
        throw new Error(
          `the batch never waited on cus_b (${ended.ok ? 'it finished' : String(ended.error)})`,
        );
      }
      expect(await subscriberHeldElsewhere(holder, 'cus_a')).toBe(true);
      expect(await subscriberHeldElsewhere(holder, 'cus_c')).toBe(false);
      await holder.rollback().execute();
      holderOpen = false;
      const ended = await outcome;
      if (!ended.ok) throw ended.error;
      expect([...ended.result.results.values()].map((r) => r.result)).toEqual([
        'applied',
        'applied',
        'applied',
      ]);
    } finally {
      if (holderOpen) await holder.rollback().execute();
    }
  });

  it("is tried again whole when Postgres ends it as a deadlock's victim, on a dry run too", async () => {
    // The dry run's batch locks cus_a, then waits for cus_b; the holder then asks for cus_a. The batch, waiting
    // longer, is the victim; its try is rolled back to its savepoint in the dry run's transaction (which keeps it
    // usable and lets cus_a go), and `transact` runs it again.
    const holder = await ctx.ownerDb.startTransaction().execute();
    let holderOpen = true;
    try {
      await lockSubscriber(holder, 'cus_b');
      const done = runImport(
        ctx,
        org,
        ndjson(
          ['cus_a', 'cus_b'].map((id) => ({
            type: 'override',
            subscriber_id: id,
            feature_key: 'seats',
            kind: 'limit',
            limit: 70,
          })),
        ),
        '?dry_run=true',
      );
      await someoneBlockedBy(ctx.ownerDb, await pidOf(holder));
      await lockSubscriber(holder, 'cus_a');
      await holder.rollback().execute();
      holderOpen = false;
      expect(await done).toMatchObject({ status: 'succeeded', dry_run: true, applied: 2, failed: 0 });
    } finally {
      if (holderOpen) {
        // The holder was the victim (a stall of over a second before it asked for cus_a): the import still ends here.
        await holder.rollback().execute();
        await ctx.app.imports.runner.idle();
      }
    }
  });

  it('keeps the lock of an override line it refused: later lines count on it being held', async () => {
    await ctx.db.transaction().execute(async (trx) => {
      const outcome = await applyBatch(
        trx,
        {
          organizationId: org.organization_id,
          catalogLimits: ctx.config.catalogLimits,
          nowMs: Date.now(),
          relayAfterMs: 30_000,
        },
        [
          {
            line: 1,
            record: {
              type: 'override',
              subscriber_id: 'cus_b',
              feature_key: 'nope',
              kind: 'limit',
              limit: 1,
            },
          },
        ],
      );
      expect(outcome.results.get(1)?.result).toBe('failed');
      const probe = await ctx.ownerDb.startTransaction().execute();
      try {
        expect(await subscriberHeldElsewhere(probe, 'cus_b')).toBe(true);
      } finally {
        await probe.rollback().execute();
      }
    });
  });
});
