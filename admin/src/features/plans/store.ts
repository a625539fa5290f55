import type { Kysely, Transaction } from 'kysely';
import type { Database, Plan, PlanKind } from '@ent/common/db/database';
import type { ResolvedGrant } from './grants.ts';

type Db = Kysely<Database> | Transaction<Database>;

export interface StoredGrant {
  plan_id: string;
  feature: string;
  kind: ResolvedGrant['kind'];
  limit: number | null;
}

export function findPlan(
  db: Db,
  organizationId: string,
  key: string,
  options: { forUpdate?: boolean } = {},
): Promise<Plan | undefined> {
  let query = db
    .selectFrom('plans')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('key', '=', key);
  if (options.forUpdate) query = query.forUpdate();
  return query.executeTakeFirst();
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
    .select(['g.plan_id', 'f.key as feature', 'g.feature_kind as kind', 'g.limit_value as limit'])
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
        limit_value: grant.kind === 'limit' ? grant.limit : null,
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
