import { transact } from '@ent/common/outbox/record';
import type { Kysely, Transaction } from 'kysely';
import type { Database, Plan } from '@ent/common/db/database';
import { conflict, notFound } from '@ent/common/errors/app-error';
import type { CreatePlanBody, GrantBody, GrantInput, PlanBody, UpdatePlanBody } from '@ent/contract/plans';
import { findFeaturesByKeys } from '../features/service.ts';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';
import { bumpCatalogVersion } from '../shared/versions.ts';
import { archivedDetails, planCreatedDetails, planUpdatedDetails, type PlanState } from './grant-changes.ts';
import { assertCatalogRoom, type CatalogLimits } from '../shared/catalog-limits.ts';
import { byFeatureKey, resolveGrants, toGrantBody, type ResolvedGrant } from './grants.ts';
import {
  countActiveSubscriptions,
  deletePlanRow,
  findGrants,
  findPlan,
  insertPlan,
  listPlans as listPlanRows,
  lockPlanRow,
  planIsReferenced,
  replaceGrants,
  updatePlanRow,
  type PlanListFilter,
} from './store.ts';
import { withOrganizationLocked } from '../shared/write/locks.ts';
import type { AuditDetails, WriteOutcome } from '../shared/write/outcome.ts';

/** A plan with its grants ordered by feature key. */
export interface PlanWithGrants {
  plan: Plan;
  grants: GrantBody[];
  /** Active subscriptions; counted only when a read asks for it (`include=subscriber_count`). */
  subscriberCount?: number;
}

/** What a plan read adds to the plan object on request. */
export interface PlanReadOptions {
  subscriberCount?: boolean;
}

export const toPlanBody = ({ plan, grants, subscriberCount }: PlanWithGrants): PlanBody => ({
  key: plan.key,
  name: plan.name,
  kind: plan.kind,
  archived: plan.archived_at !== null,
  grants,
  created_at: plan.created_at.toISOString(),
  updated_at: plan.updated_at.toISOString(),
  ...(subscriberCount === undefined ? {} : { subscriber_count: subscriberCount }),
});

/**
 * Reports a plan write on its outcome: its details and event when it changed something (the version was bumped);
 * a no-op (null details) is neither an event nor audited as a change, and still answers once the catalog is
 * published.
 */
function reportChange(
  outcome: WriteOutcome,
  type: string,
  plan: PlanWithGrants,
  details: AuditDetails | null,
) {
  if (!details) {
    outcome.unchangedOn({ catalog: true });
    return;
  }
  outcome.details = details;
  outcome.raise(type, toPlanBody(plan));
}

const FOREIGN_KEY_VIOLATION = '23503';

const planNotFound = (key: string) => notFound(`No plan with key "${key}".`, { field: 'key', value: key });

const planInUse = (key: string) =>
  conflict(
    `Plan "${key}" is referenced by at least one subscription (active or canceled) and cannot be deleted.`,
    {
      field: 'key',
      value: key,
    },
  );

const planState = ({ plan, grants }: PlanWithGrants): PlanState => ({
  key: plan.key,
  name: plan.name,
  kind: plan.kind,
  archived: plan.archived_at !== null,
  grants,
});

async function resolveAgainstCatalog(
  trx: Transaction<Database>,
  organizationId: string,
  inputs: readonly GrantInput[],
): Promise<ResolvedGrant[]> {
  const keys = [...new Set(inputs.map((input) => input.feature))];
  const features = await findFeaturesByKeys(trx, organizationId, keys);
  return resolveGrants(inputs, features);
}

const grantBodies = (grants: readonly ResolvedGrant[]): GrantBody[] =>
  [...grants].sort(byFeatureKey).map(toGrantBody);

async function grantsOf(db: Kysely<Database> | Transaction<Database>, planId: string): Promise<GrantBody[]> {
  return (await findGrants(db, [planId])).map(toGrantBody);
}

async function lockPlan(
  trx: Transaction<Database>,
  organizationId: string,
  key: string,
): Promise<PlanWithGrants> {
  const plan = await lockPlanRow(trx, organizationId, key);
  if (!plan) throw planNotFound(key);
  return { plan, grants: await grantsOf(trx, plan.id) };
}

export async function createPlan(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  input: CreatePlanBody,
  limits: CatalogLimits,
): Promise<PlanWithGrants> {
  return transact(db, async (trx) => {
    const grants = await resolveAgainstCatalog(trx, organizationId, input.grants ?? []);
    await assertCatalogRoom(trx, organizationId, limits, { plans: 1, grants: grants.length });
    const plan = await insertPlan(trx, organizationId, input);
    if (!plan)
      throw conflict(`A plan with key "${input.key}" already exists.`, { field: 'key', value: input.key });
    await replaceGrants(trx, plan.id, grants);
    await bumpCatalogVersion(trx, outcome, organizationId);
    const created = { plan, grants: grantBodies(grants) };
    reportChange(outcome, 'plan.created', created, planCreatedDetails(planState(created)));
    return created;
  });
}

export async function updatePlan(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  key: string,
  input: UpdatePlanBody,
  limits: CatalogLimits,
): Promise<PlanWithGrants> {
  return withOrganizationLocked(db, organizationId, async (trx) => {
    const before = await lockPlan(trx, organizationId, key);
    const newGrants = input.grants
      ? await resolveAgainstCatalog(trx, organizationId, input.grants)
      : undefined;
    if (newGrants) {
      await assertCatalogRoom(trx, organizationId, limits, {
        grants: newGrants.length,
        replacingPlanId: before.plan.id,
      });
    }
    const grants = newGrants ? grantBodies(newGrants) : before.grants;
    const name = input.name ?? before.plan.name;
    const details = planUpdatedDetails(planState(before), { ...planState(before), name, grants });
    if (!details) {
      reportChange(outcome, 'plan.updated', before, null);
      return before;
    }
    const plan = await updatePlanRow(trx, before.plan.id, { name });
    if (newGrants && details.grants) await replaceGrants(trx, plan.id, newGrants);
    await bumpCatalogVersion(trx, outcome, organizationId);
    reportChange(outcome, 'plan.updated', { plan, grants }, details);
    return { plan, grants };
  });
}

export async function setPlanArchived(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  key: string,
  archived: boolean,
): Promise<PlanWithGrants> {
  const type = archived ? 'plan.archived' : 'plan.unarchived';
  return withOrganizationLocked(db, organizationId, async (trx) => {
    const before = await lockPlan(trx, organizationId, key);
    const details = archivedDetails(before.plan.archived_at !== null, archived);
    if (!details) {
      reportChange(outcome, type, before, null);
      return before;
    }
    const now = new Date();
    const plan = await updatePlanRow(trx, before.plan.id, {
      archived_at: archived ? now : null,
      updated_at: now,
    });
    await bumpCatalogVersion(trx, outcome, organizationId);
    const after = { plan, grants: before.grants };
    reportChange(outcome, type, after, details);
    return after;
  });
}

/** Refuses while any subscription references the plan, also when one is created concurrently (the FK). */
export async function deletePlan(
  db: Kysely<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  key: string,
): Promise<PlanWithGrants> {
  try {
    return await withOrganizationLocked(db, organizationId, async (trx) => {
      const deleted = await lockPlan(trx, organizationId, key);
      if (await planIsReferenced(trx, organizationId, deleted.plan.id)) throw planInUse(key);
      await deletePlanRow(trx, deleted.plan.id);
      await bumpCatalogVersion(trx, outcome, organizationId);
      outcome.raise('plan.deleted', toPlanBody(deleted));
      return deleted;
    });
  } catch (error) {
    if ((error as { code?: string }).code === FOREIGN_KEY_VIOLATION) throw planInUse(key);
    throw error;
  }
}

/** Adds each plan's active subscription count, when asked for, in one query for all of them. */
async function withSubscriberCounts(
  db: Kysely<Database>,
  plans: PlanWithGrants[],
  options: PlanReadOptions,
): Promise<PlanWithGrants[]> {
  if (!options.subscriberCount) return plans;
  const counts = await countActiveSubscriptions(
    db,
    plans.map(({ plan }) => plan.id),
  );
  return plans.map((item) => ({ ...item, subscriberCount: counts.get(item.plan.id) ?? 0 }));
}

export async function getPlan(
  db: Kysely<Database>,
  organizationId: string,
  key: string,
  options: PlanReadOptions = {},
): Promise<PlanWithGrants> {
  const plan = await findPlan(db, organizationId, key);
  if (!plan) throw planNotFound(key);
  const [found] = await withSubscriberCounts(db, [{ plan, grants: await grantsOf(db, plan.id) }], options);
  return found!;
}

export async function listPlans(
  db: Kysely<Database>,
  organizationId: string,
  request: PageRequest<PlanListFilter>,
  options: PlanReadOptions = {},
): Promise<Page<PlanWithGrants>> {
  const { items: plans, hasMore } = await paginate(
    request,
    { find: (key) => findPlan(db, organizationId, key), what: 'a plan key of this organization' },
    (filter) => listPlanRows(db, organizationId, filter),
  );
  const grants = await findGrants(
    db,
    plans.map((plan) => plan.id),
  );
  const byPlan = new Map<string, GrantBody[]>(plans.map((plan) => [plan.id, []]));
  for (const grant of grants) byPlan.get(grant.plan_id)!.push(toGrantBody(grant));
  const items = plans.map((plan) => ({ plan, grants: byPlan.get(plan.id)! }));
  return { items: await withSubscriberCounts(db, items, options), hasMore };
}

/** A plan row by key, read in the caller's transaction (the import upserts plans by key). */
export { findPlan } from './store.ts';
