import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Database } from '@ent/common/db/database';
import { meteredPeriodAt } from '@ent/common/metering/metered-period';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { foldSettledCreditFigures } from '../../src/features/credits/worker/fold.ts';
import { persistCreditHashes } from '../../src/features/credits/worker/spent.ts';
import { recordRollovers } from '../../src/features/credits/worker/rollovers.ts';
import { meteredSubscriber } from '../metered-usage/balances.ts';
import {
  heldElsewhere,
  pidOf,
  startBlockedBy as startBlockedByLock,
  type Outcome,
} from '../../../test-support/lock-waits.ts';

// The drain's and the fold's UPDATEs of credits lock the rows they write in (organization_id, id) order, whatever
// order their join's plan yields them in: two statements locking in different orders can deadlock. Each case holds
// the middle credit from another transaction, lets the statement block on it, and looks at which of the other two it
// already holds: the first in key order, never the last.

const NOW = Date.parse('2027-03-15T12:00:00.000Z');
/** January 2027: settled at NOW, inside the fold's window. */
const january = meteredPeriodAt('month', null, Date.parse('2027-01-15T00:00:00Z'));
const [A, B, C, D] = ['cr_lock_a', 'cr_lock_b', 'cr_lock_c', 'cr_lock_d'];

let ctx: AdminTestContext;
let org: TestOrganization;
let featureId: string;

const creditRow = (id: string) => ({
  id,
  organization_id: org.organization_id,
  subscriber_id: 'alice',
  feature_id: featureId,
  amount: 50,
  priority: 1,
  effective_at: new Date(january.startMs),
  source: 'manual' as const,
});

beforeAll(async () => {
  ctx = await createAdminContext();
});
// An organization of its own per case, alice on api-calls, and three credits inserted in reverse key order: a
// statement locking in the heap's order would take c first.
beforeEach(async () => {
  org = await createTestOrganization(ctx.db, 'Credit lock order');
  await meteredSubscriber(ctx, org, { subscriberId: 'alice', feature: 'api-calls', limit: 100 });
  featureId = (
    await ctx.db
      .selectFrom('features')
      .select('id')
      .where('organization_id', '=', org.organization_id)
      .where('key', '=', 'api-calls')
      .executeTakeFirstOrThrow()
  ).id;
  await ctx.db.insertInto('credits').values([C, B, A].map(creditRow)).execute();
  const { rows } = await sql<{ id: string }>`
    SELECT id FROM credits WHERE organization_id = ${org.organization_id} ORDER BY ctid
  `.execute(ctx.db);
  expect(rows.map((row) => row.id)).toEqual([C, B, A]);
});
afterAll(async () => {
  await ctx?.close();
});

/**
 * Plans to run each statement under: the planner's own, and one without index scans, where the credits come from the
 * heap in its order (c, b, a) as a large batch's hash join may take them. The statement must lock in key order under
 * either.
 */
const PLANS = {
  planner: [],
  'heap order': [sql`SET LOCAL enable_indexscan = off`, sql`SET LOCAL enable_bitmapscan = off`],
};

/** Whether another transaction holds the credit. */
const creditHeldElsewhere = (trx: Transaction<Database>, creditId: string) =>
  heldElsewhere(
    trx,
    sql`SELECT id FROM credits WHERE organization_id = ${org.organization_id} AND id = ${creditId} FOR UPDATE NOWAIT`,
  );

const startBlockedBy = <T>(
  holderPid: number,
  statement: (trx: Transaction<Database>) => Promise<T>,
  settings: readonly { execute: (db: Transaction<Database>) => Promise<unknown> }[] = [],
) => startBlockedByLock(ctx.db, ctx.ownerDb, holderPid, statement, settings);

/**
 * Runs `statement` in a transaction of its own while T1 holds credit b; once it waits on T1, answers which of a and
 * c it holds, then lets it finish and answers its result too.
 */
async function locksWhileBlockedOnB<T>(
  plan: keyof typeof PLANS,
  statement: (trx: Transaction<Database>) => Promise<T>,
): Promise<{ holdsA: boolean; holdsC: boolean; result: T }> {
  const t1 = await ctx.db.startTransaction().execute();
  let t1Open = true;
  try {
    await sql`
      SELECT id FROM credits WHERE organization_id = ${org.organization_id} AND id = ${B} FOR UPDATE
    `.execute(t1);
    let outcome: Promise<Outcome<T>>;
    try {
      ({ outcome } = await startBlockedBy(await pidOf(t1), statement, PLANS[plan]));
    } catch (error) {
      await t1.rollback().execute();
      t1Open = false;
      const ended = await (error as { outcome: Promise<Outcome<T>> }).outcome;
      throw new Error(
        `the statement never waited on credit b (${ended.ok ? 'it finished' : String(ended.error)})`,
      );
    }
    const holdsA = await creditHeldElsewhere(t1, A);
    const holdsC = await creditHeldElsewhere(t1, C);
    await t1.rollback().execute();
    t1Open = false;
    const ended = await outcome;
    if (!ended.ok) throw ended.error;
    return { holdsA, holdsC, result: ended.result };
  } finally {
    if (t1Open) await t1.rollback().execute();
  }
}

const figures = () =>
  ctx.db
    .selectFrom('credits')
    .select(['id', 'spent', 'spent_seq'])
    .where('organization_id', '=', org.organization_id)
    .orderBy('id')
    .execute();

describe('credits are locked in key order', () => {
  it.each(Object.keys(PLANS) as (keyof typeof PLANS)[])(
    "by the drain's write of credit-spent hashes (%s plan)",
    async (plan) => {
      const { holdsA, holdsC, result } = await locksWhileBlockedOnB(plan, (trx) =>
        persistCreditHashes(
          trx,
          org.organization_id,
          [
            {
              subscriberId: 'alice',
              feature: 'api-calls',
              fields: [C, '3', A, '1', B, '2'],
              standalone: true,
            },
          ],
          NOW,
          500,
        ),
      );
      expect({ holdsA, holdsC }).toEqual({ holdsA: true, holdsC: false });
      expect(result).toEqual({ persisted: 3, events: [] });
      expect(await figures()).toEqual([
        { id: A, spent: 1, spent_seq: 500 },
        { id: B, spent: 2, spent_seq: 500 },
        { id: C, spent: 3, spent_seq: 500 },
      ]);
    },
  );

  it.each(Object.keys(PLANS) as (keyof typeof PLANS)[])(
    "by the sweep's fold of settled figures (%s plan)",
    async (plan) => {
      // d's own figure is newer than the row's: the fold leaves it, and never locks it.
      await ctx.db
        .insertInto('credits')
        .values({ ...creditRow(D), spent: 9, spent_seq: 200 })
        .execute();
      await ctx.db
        .insertInto('metered_usage')
        .values({
          organization_id: org.organization_id,
          subscriber_id: 'alice',
          feature_key: 'api-calls',
          period_start: new Date(january.startMs),
          period_end: new Date(january.endMs!),
          used: 1,
          revision: 1,
          credit_spent: JSON.stringify({ [A]: 7, [B]: 1, [C]: 2, [D]: 4 }),
          credit_spent_seq: 100,
        })
        .execute();
      const { holdsA, holdsC, result } = await locksWhileBlockedOnB(plan, (trx) =>
        foldSettledCreditFigures(trx, NOW),
      );
      expect({ holdsA, holdsC }).toEqual({ holdsA: true, holdsC: false });
      expect(result).toBe(1);
      expect(await figures()).toEqual([
        { id: A, spent: 7, spent_seq: 100 },
        { id: B, spent: 1, spent_seq: 100 },
        { id: C, spent: 2, spent_seq: 100 },
        { id: D, spent: 9, spent_seq: 200 },
      ]);
    },
  );
});

describe("the drain's rollover credits", () => {
  // An import holds its subscribers (FOR UPDATE, in key order) and then inserts credits, possibly a rollover credit
  // the gateway named (an export imported again). Were the drain to insert that credit first, its foreign key check
  // would wait for the import's subscriber lock while the import's insert waited for the drain's uncommitted row: a
  // deadlock. The drain takes the subscribers' key-share lock before inserting, so it waits for the import instead.
  it('waits for a writer holding the subscriber before inserting, so that writer inserts the same credit unhindered', async () => {
    const period = meteredPeriodAt('month', null, NOW);
    const rolloverId = 'cr_lock_rollover';
    const t1 = await ctx.db.startTransaction().execute();
    let t1Open = true;
    try {
      await sql`
        SELECT subscriber_id FROM subscribers
        WHERE organization_id = ${org.organization_id} AND subscriber_id = 'alice' FOR UPDATE
      `.execute(t1);
      const { outcome } = await startBlockedBy(await pidOf(t1), (trx) =>
        recordRollovers(
          trx,
          org.organization_id,
          [
            {
              id: rolloverId,
              subscriberId: 'alice',
              feature: 'api-calls',
              amount: 5,
              sourcePeriodStartMs: january.startMs,
              startMs: period.startMs,
              endMs: period.endMs,
            },
          ],
          NOW,
        ),
      );
      // The import's insert of the same credit: it must not wait on the drain (a deadlock would end one of them).
      await sql`SET LOCAL lock_timeout = '3s'`.execute(t1);
      await t1.insertInto('credits').values(creditRow(rolloverId)).execute();
      await t1.commit().execute();
      t1Open = false;
      const ended = await outcome;
      if (!ended.ok) throw ended.error;
      // The import's credit stands; the drain inserted nothing over it and raised no event.
      expect(ended.result).toEqual([]);
      expect(
        await ctx.db
          .selectFrom('credits')
          .select(['id', 'source'])
          .where('organization_id', '=', org.organization_id)
          .where('id', '=', rolloverId)
          .execute(),
      ).toEqual([{ id: rolloverId, source: 'manual' }]);
    } finally {
      if (t1Open) await t1.rollback().execute();
    }
  });
});
