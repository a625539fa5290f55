import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { conflict, validationError } from '@ent/common/errors/app-error';
import { newId } from '@ent/common/ids';
import type { SubscriberLine, SubscriptionLine } from '@ent/contract/import-lines';
import { subscriberNotFound } from '../subscribers/service.ts';
import type { AppliedResult } from './results.ts';

export interface Lined<T> {
  line: number;
  record: T;
}

export interface BulkResult {
  results: Map<number, AppliedResult>;
  /** Subscribers whose snapshot the batch changed: their versions are bumped once, at the batch's end. */
  changed: Set<string>;
}

/** The last line of each id wins; an earlier line of the same id in the batch takes the winner's result. */
export function lastById<T>(
  lines: readonly Lined<T>[],
  idOf: (record: T) => string,
): Map<string, Lined<T>[]> {
  const byId = new Map<string, Lined<T>[]>();
  for (const line of lines) {
    const id = idOf(line.record);
    const same = byId.get(id);
    if (same) same.push(line);
    else byId.set(id, [line]);
  }
  return byId;
}

/**
 * Subscribers upserted by id in two statements: lines naming a `name` insert or rename (only when it differs); lines
 * without one insert or leave the subscriber as it is (PATCH's reading of an absent field). RETURNING tells applied
 * from unchanged.
 */
export async function applySubscribers(
  trx: Transaction<Database>,
  organizationId: string,
  lines: readonly Lined<SubscriberLine>[],
): Promise<BulkResult> {
  const byId = lastById(lines, (record) => record.subscriber_id);
  const named: { id: string; name: string | null }[] = [];
  const unnamed: string[] = [];
  for (const [id, same] of byId) {
    const winner = same[same.length - 1]!.record;
    if (winner.name === undefined) unnamed.push(id);
    else named.push({ id, name: winner.name });
  }
  const changed = new Set<string>();
  if (named.length > 0) {
    const { rows } = await sql<{ subscriber_id: string }>`
      INSERT INTO subscribers (organization_id, subscriber_id, name)
      SELECT ${organizationId}, i.id, i.name FROM unnest(${named.map((n) => n.id)}::text[], ${named.map((n) => n.name)}::text[]) AS i(id, name)
      ON CONFLICT (organization_id, subscriber_id) DO UPDATE SET name = EXCLUDED.name, updated_at = now()
        WHERE subscribers.name IS DISTINCT FROM EXCLUDED.name
      RETURNING subscriber_id
    `.execute(trx);
    for (const row of rows) changed.add(row.subscriber_id);
  }
  if (unnamed.length > 0) {
    const { rows } = await sql<{ subscriber_id: string }>`
      INSERT INTO subscribers (organization_id, subscriber_id)
      SELECT ${organizationId}, i.id FROM unnest(${unnamed}::text[]) AS i(id)
      ON CONFLICT (organization_id, subscriber_id) DO NOTHING
      RETURNING subscriber_id
    `.execute(trx);
    for (const row of rows) changed.add(row.subscriber_id);
  }
  const results = new Map<number, AppliedResult>();
  for (const [id, same] of byId) {
    const result: AppliedResult = { result: changed.has(id) ? 'applied' : 'unchanged' };
    for (const { line } of same) results.set(line, result);
  }
  return { results, changed };
}

/**
 * Subscriptions upserted by (subscriber, plan): an active subscription to the plan makes the line unchanged, else
 * one is created. Refused as `POST .../subscriptions` refuses, in its order: a missing subscriber (404), an unknown
 * plan (422), an archived plan (409), except that an active subscription makes the line unchanged first. Subscribers are locked in id order (as the single route locks its one) and
 * plans shared, so neither changes until the batch commits.
 */
export async function applySubscriptions(
  trx: Transaction<Database>,
  organizationId: string,
  lines: readonly Lined<SubscriptionLine>[],
): Promise<BulkResult> {
  const subscriberIds = [...new Set(lines.map((l) => l.record.subscriber_id))].sort();
  const planKeys = [...new Set(lines.map((l) => l.record.plan_id))];
  const { rows: subscribers } = await sql<{ subscriber_id: string }>`
    SELECT subscriber_id FROM subscribers
    WHERE organization_id = ${organizationId} AND subscriber_id = ANY(${subscriberIds}::text[])
    ORDER BY subscriber_id FOR UPDATE
  `.execute(trx);
  const { rows: plans } = await sql<{ id: string; key: string; archived: boolean }>`
    SELECT id, key, archived_at IS NOT NULL AS archived FROM plans
    WHERE organization_id = ${organizationId} AND key = ANY(${planKeys}::text[]) FOR SHARE
  `.execute(trx);
  const { rows: active } = await sql<{ subscriber_id: string; plan_id: string }>`
    SELECT subscriber_id, plan_id FROM subscriptions
    WHERE organization_id = ${organizationId} AND subscriber_id = ANY(${subscriberIds}::text[]) AND status = 'active'
  `.execute(trx);
  const existing = new Set(subscribers.map((s) => s.subscriber_id));
  const planByKey = new Map(plans.map((p) => [p.key, p]));
  const activePairs = new Set(active.map((a) => `${a.subscriber_id}\u0000${a.plan_id}`));
  const results = new Map<number, AppliedResult>();
  const created: { id: string; subscriberId: string; planId: string }[] = [];
  for (const { line, record } of lines) {
    if (!existing.has(record.subscriber_id)) {
      results.set(line, { result: 'failed', error: subscriberNotFound(record.subscriber_id) });
      continue;
    }
    const plan = planByKey.get(record.plan_id);
    if (!plan) {
      const error = validationError(`No plan with key "${record.plan_id}".`, {
        field: 'plan_id',
        value: record.plan_id,
      });
      results.set(line, { result: 'failed', error });
      continue;
    }
    const pair = `${record.subscriber_id}\u0000${plan.id}`;
    // Already subscribed is the state the line asks for, archived plan or not (a re-imported export has both).
    if (activePairs.has(pair)) {
      results.set(line, { result: 'unchanged' });
      continue;
    }
    if (plan.archived) {
      const error = conflict(`The plan "${plan.key}" is archived and takes no new subscriptions.`, {
        field: 'plan_id',
        value: plan.key,
      });
      results.set(line, { result: 'failed', error });
      continue;
    }
    activePairs.add(pair);
    created.push({ id: newId('sub'), subscriberId: record.subscriber_id, planId: plan.id });
    results.set(line, { result: 'applied' });
  }
  if (created.length > 0) {
    await sql`
      INSERT INTO subscriptions (id, organization_id, subscriber_id, plan_id)
      SELECT c.id, ${organizationId}, c.subscriber_id, c.plan_id
      FROM unnest(${created.map((c) => c.id)}::text[], ${created.map((c) => c.subscriberId)}::text[],
        ${created.map((c) => c.planId)}::text[]) AS c(id, subscriber_id, plan_id)
    `.execute(trx);
  }
  return { results, changed: new Set(created.map((c) => c.subscriberId)) };
}

/** One version bump and one outbox entry per changed subscriber (versions.ts's rule, for a batch at once). */
export async function bumpSubscribers(
  trx: Transaction<Database>,
  organizationId: string,
  subscriberIds: readonly string[],
): Promise<void> {
  const ids = [...subscriberIds].sort();
  await sql`
    WITH bumped AS (
      UPDATE subscribers SET version = version + 1, updated_at = now()
      WHERE organization_id = ${organizationId} AND subscriber_id = ANY(${ids}::text[])
      RETURNING subscriber_id, version
    )
    INSERT INTO outbox (organization_id, kind, subject, version)
    SELECT ${organizationId}, 'subscriber', subscriber_id, version FROM bumped
  `.execute(trx);
}
