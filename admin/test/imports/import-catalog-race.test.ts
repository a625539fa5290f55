import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ImportRecordLine } from '@ent/contract/import-lines';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { pidOf, startBlockedBy, type Outcome } from '../../../test-support/lock-waits.ts';
import { applyBatch, type BatchOutcome } from '../../src/features/imports/apply-batch.ts';
import { createFeature } from '../../src/features/features/service.ts';
import { createPlan } from '../../src/features/plans/service.ts';
import { WriteOutcome } from '../../src/features/shared/write/outcome.ts';

// Two imports of one catalog at once (found by a probe: 13 of 15 concurrent pairs): a feature or plan line looked its
// key up, found nothing, and its insert then met the other import's row: the line failed 409 "already exists" where
// an upsert by natural key, run one after the other, answers unchanged or applied. Here another transaction creates
// the key and holds it uncommitted until the batch's insert waits on it.

let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Import catalog race');
});
afterAll(() => ctx.close());

/** Applies `record` in a batch while another transaction has made its key (`make`) and not committed, then commits. */
async function appliedWhileMade(
  make: (trx: Parameters<typeof createFeature>[0]) => Promise<unknown>,
  record: ImportRecordLine,
): Promise<BatchOutcome> {
  const holder = await ctx.db.startTransaction().execute();
  let outcome: Promise<Outcome<BatchOutcome>>;
  try {
    await make(holder);
    ({ outcome } = await startBlockedBy(ctx.db, ctx.ownerDb, await pidOf(holder), (trx) =>
      applyBatch(
        trx,
        {
          organizationId: org.organization_id,
          catalogLimits: ctx.config.catalogLimits,
          nowMs: Date.now(),
          relayAfterMs: 30_000,
        },
        [{ line: 1, record }],
      ),
    ));
  } catch (error) {
    await holder.rollback().execute();
    throw error;
  }
  await holder.commit().execute();
  const ended = await outcome;
  if (!ended.ok) throw ended.error;
  return ended.result;
}

describe('an import line whose key another transaction creates meanwhile', () => {
  it('a feature line updates the feature the other made, instead of failing 409', async () => {
    const batch = await appliedWhileMade(
      (trx) =>
        createFeature(
          trx,
          new WriteOutcome(),
          org.organization_id,
          { key: 'rf_x', name: 'First', kind: 'flag' },
          ctx.config.catalogLimits,
        ),
      { type: 'feature', key: 'rf_x', name: 'Second', kind: 'flag' },
    );
    expect(batch.results.get(1)).toEqual({ result: 'applied' });
    const feature = await ctx.db
      .selectFrom('features')
      .select('name')
      .where('organization_id', '=', org.organization_id)
      .where('key', '=', 'rf_x')
      .executeTakeFirstOrThrow();
    expect(feature.name).toBe('Second');
  });

  it('a plan line likewise', async () => {
    const batch = await appliedWhileMade(
      (trx) =>
        createPlan(
          trx,
          new WriteOutcome(),
          org.organization_id,
          { key: 'rp_x', name: 'Plan', kind: 'catalog' },
          ctx.config.catalogLimits,
        ),
      { type: 'plan', key: 'rp_x', name: 'Plan', kind: 'catalog' },
    );
    expect(batch.results.get(1)).toEqual({ result: 'unchanged' });
  });
});
