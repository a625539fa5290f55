import type { Kysely, Transaction } from 'kysely';
import type { Database, Plan, PlanKind } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';
import type { GrantRow, ResolvedGrant } from './grants.ts';

type Db = Kysely<Database> | Transaction<Database>;

export type StoredGrant = GrantRow & { plan_id: string };

const planByKey = (db: Db, organizationId: string, key: string) =>
  db.selectFrom('plans').selectAll().where('organization_id', '=', organizationId).where('key', '=', key);

export function findPlan(db: Db, organizationId: string, key: string): Promise<Plan | undefined> {
  return planByKey(db, organizationId, key).executeTakeFirst();
}

/** The plan's row, locked until the transaction ends; undefined when there is none. */
export function lockPlanRow(
  trx: Transaction<Database>,
  organizationId: string,
  key: string,
): Promise<Plan | undefined> {
  return planByKey(trx, organizationId, key).forUpdate().executeTakeFirst();
}

/** The new plan, or undefined when its key is taken. */
export function insertPlan(
  trx: Transaction<Database>,
  organizationId: string,
  input: { key: string; name: string; kind: PlanKind },
): Promise<Plan | undefined> {
  return trx
    .insertInto('plans')
    .values({
      id: newId('plan'),
      organization_id: organizationId,
      key: input.key,
      name: input.name,
      kind: input.kind,
    })
    .onConflict((oc) => oc.columns(['organization_id', 'key']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export function updatePlanRow(
  trx: Transaction<Database>,
  planId: string,
  values: { name?: string; archived_at?: Date | null; updated_at?: Date },
): Promise<Plan> {
  return trx
    .updateTable('plans')
    .set({ updated_at: new Date(), ...values })
    .where('id', '=', planId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function deletePlanRow(trx: Transaction<Database>, planId: string): Promise<void> {
  await trx.deleteFrom('plans').where('id', '=', planId).execute();
}

export interface PlanListFilter {
  limit: number;
  startingAfter?: string;
  kind?: PlanKind;
}

/** Ordered by key; fetches one extra row to tell whether another page follows. */
export function listPlans(db: Db, organizationId: string, filter: PlanListFilter): Promise<Plan[]> {
  let query = db.selectFrom('plans').selectAll().where('organization_id', '=', organizationId);
  if (filter.kind) query = query.where('kind', '=', filter.kind);
  if (filter.startingAfter) query = query.where('key', '>', filter.startingAfter);
  return query
    .orderBy('key')
    .limit(filter.limit + 1)
    .execute();
}

/** The grants of these plans with their feature keys, ordered by feature key. */
export function findGrants(db: Db, planIds: readonly string[]): Promise<StoredGrant[]> {
  if (planIds.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('plan_grants as g')
    .innerJoin('features as f', 'f.id', 'g.feature_id')
    .select([
      'g.plan_id',
      'f.key as feature',
      'g.feature_kind as kind',
      'g.limit_value as limit',
      'g.reset',
      'g.reset_anchor as resetAnchor',
      'g.soft',
      'g.rollover_max as rolloverMax',
    ])
    .where('g.plan_id', 'in', planIds)
    .orderBy('f.key')
    .execute();
}

export async function replaceGrants(
  trx: Transaction<Database>,
  planId: string,
  grants: readonly ResolvedGrant[],
): Promise<void> {
  await trx.deleteFrom('plan_grants').where('plan_id', '=', planId).execute();
  if (grants.length === 0) return;
  await trx
    .insertInto('plan_grants')
    .values(
      grants.map((grant) => ({
        plan_id: planId,
        feature_id: grant.featureId,
        feature_kind: grant.kind,
        limit_value: grant.kind === 'flag' ? null : grant.limit,
        reset: grant.reset,
        reset_anchor: grant.resetAnchor,
        soft: grant.soft,
        rollover_max: grant.rolloverMax,
      })),
    )
    .execute();
}

/** Any subscription, active or canceled, that still references the plan. */
export async function planIsReferenced(db: Db, organizationId: string, planId: string): Promise<boolean> {
  const row = await db
    .selectFrom('subscriptions')
    .select('id')
    .where('organization_id', '=', organizationId)
    .where('plan_id', '=', planId)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Active subscriptions per plan, one grouped query for all of them; a plan with none is absent. The ids come
 * from the caller's organization-scoped read, so the count needs no organization filter, and without one it
 * reads the partial index subscriptions_plan_active alone.
 */
export async function countActiveSubscriptions(
  db: Db,
  planIds: readonly string[],
): Promise<Map<string, number>> {
  if (planIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('subscriptions')
    .select(['plan_id', (eb) => eb.fn.countAll<number>().as('count')])
    .where('plan_id', 'in', planIds)
    .where('status', '=', 'active')
    .groupBy('plan_id')
    .execute();
  return new Map(rows.map((row) => [row.plan_id, Number(row.count)]));
}
