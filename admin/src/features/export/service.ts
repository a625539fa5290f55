import type { Kysely } from 'kysely';
import type { ExportLine } from '@ent/contract/exports';
import type { Database } from '@ent/common/db/database';
import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';
import { currentSpent } from '../credits/spent.ts';
import { toGrantBody } from '../plans/grants.ts';
import {
  activeSubscriptionsIn,
  creditsIn,
  exportedFeatures,
  exportedPlans,
  type ExportedGrant,
  overridesIn,
  subscriberPage,
  subscriberWindowEnd,
  type ExportedOverride,
  type SubscriberWindow,
} from './store.ts';

/** Rows per query: large enough that a round trip is a small part of a page, small enough to stream. */
const PAGE_SIZE = 5000;

const lines = (records: readonly ExportLine[]): string =>
  records.length === 0 ? '' : records.map((record) => JSON.stringify(record)).join('\n') + '\n';

function overrideLine(row: ExportedOverride): ExportLine {
  const base = {
    type: 'override',
    subscriber_id: row.subscriber_id,
    feature_key: row.feature,
    kind: row.kind,
  } as const;
  const expires_at = row.expires_at ? row.expires_at.toISOString() : null;
  return row.kind === 'flag'
    ? { ...base, allowed: row.allowed ?? false, expires_at }
    : { ...base, limit: row.limit, expires_at };
}

function grantsByPlan(grants: readonly ExportedGrant[]): Map<string, ExportedGrant[]> {
  const byPlan = new Map<string, ExportedGrant[]>();
  for (const grant of grants) {
    const list = byPlan.get(grant.plan_id);
    if (list) list.push(grant);
    else byPlan.set(grant.plan_id, [grant]);
  }
  return byPlan;
}

type ExportedCredit = Awaited<ReturnType<typeof creditsIn>>[number];

/** A credit as its import line, with what it has spent now (Redis's figure where it holds one). */
function creditLine(row: ExportedCredit, spent: number): ExportLine {
  return {
    type: 'credit',
    credit_id: row.id,
    subscriber_id: row.subscriber_id,
    feature: row.feature_key,
    ...(row.name === null ? {} : { name: row.name }),
    amount: row.amount,
    spent: Math.min(Math.max(0, spent), row.amount),
    priority: row.priority,
    effective_at: row.effective_at.toISOString(),
    expires_at: row.expires_at ? row.expires_at.toISOString() : null,
    created_at: row.created_at.toISOString(),
    source: row.source,
    ...(row.source_period_start ? { source_period_start: row.source_period_start.toISOString() } : {}),
  };
}

export interface ExportDeps {
  db: Kysely<Database>;
  /** Credits' spent figures are read where gateways spend them. */
  redis: RedisClient;
  redisKeys: RedisKeys;
}

/** Windows of PAGE_SIZE subscribers, in id order, from one snapshot. */
async function* subscriberWindows(
  trx: Parameters<typeof subscriberWindowEnd>[0],
  organizationId: string,
): AsyncGenerator<SubscriberWindow> {
  let after: string | null = null;
  for (;;) {
    const through: string | null = await subscriberWindowEnd(trx, organizationId, after, PAGE_SIZE);
    yield { after, through };
    if (through === null) return;
    after = through;
  }
}

/**
 * The organization as NDJSON chunks (a page of lines each), in dependency order, read from one REPEATABLE READ
 * snapshot so a write during the export is either wholly in it or not at all. Credits' spent figures are the one
 * thing read outside it: gateways move them in Redis, and the persisted column is up to a second behind. The transaction is ended when the
 * consumer stops early (a client that goes away), not only at the end.
 */
export async function* exportOrganization(deps: ExportDeps, organizationId: string): AsyncGenerator<string> {
  const trx = await deps.db
    .startTransaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute();
  let ended = false;
  try {
    yield lines(
      (await exportedFeatures(trx, organizationId)).map((feature) => ({
        type: 'feature',
        key: feature.key,
        name: feature.name,
        kind: feature.kind,
        description: feature.description,
      })),
    );
    const { plans, grants } = await exportedPlans(trx, organizationId);
    const planGrants = grantsByPlan(grants);
    yield lines(
      plans.map((plan) => ({
        type: 'plan',
        key: plan.key,
        name: plan.name,
        kind: plan.kind,
        grants: (planGrants.get(plan.id) ?? []).map(toGrantBody),
        ...(plan.archived_at !== null ? { archived: true as const } : {}),
      })),
    );
    for (let after: string | null = null; ;) {
      const page = await subscriberPage(trx, organizationId, after, PAGE_SIZE);
      if (page.length === 0) break;
      yield lines(
        page.map((row) => ({ type: 'subscriber', subscriber_id: row.subscriber_id, name: row.name })),
      );
      if (page.length < PAGE_SIZE) break;
      after = page[page.length - 1]!.subscriber_id;
    }
    for await (const window of subscriberWindows(trx, organizationId)) {
      const rows = await activeSubscriptionsIn(trx, organizationId, window);
      yield lines(
        rows.map((row) => ({
          type: 'subscription',
          subscriber_id: row.subscriber_id,
          plan_id: row.plan_key,
          anchored_at: row.anchored_at.toISOString(),
        })),
      );
    }
    for await (const window of subscriberWindows(trx, organizationId)) {
      yield lines((await overridesIn(trx, organizationId, window)).map(overrideLine));
    }
    for await (const window of subscriberWindows(trx, organizationId)) {
      const rows = await creditsIn(trx, organizationId, window);
      const spent = await currentSpent(deps.redis, deps.redisKeys, organizationId, rows);
      yield lines(rows.map((row) => creditLine(row, spent.get(row.id) ?? row.spent)));
    }
    ended = true;
    await trx.commit().execute();
  } finally {
    if (!ended) await trx.rollback().execute();
  }
}
