import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { conflict, validationError } from '@ent/common/errors/app-error';
import { newId } from '@ent/common/ids';
import { parseDateTime } from '@ent/common/http/date-time';
import type { SubscriberLine, SubscriptionLine } from '@ent/contract/import-lines';
import { subscriberNotFound } from '../subscribers/service.ts';
import type { AppliedResult } from './results.ts';
import { bySubscriberId } from './subscriber-lock-order.ts';

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

/** Subscribers the subscriber lines wrote: their rows are this transaction's, their versions already bumped. */
export interface SubscribersWritten extends BulkResult {
  /** Each written subscriber's new version (its outbox entry's). */
  versions: Map<string, number>;
  /** Those the batch created: no other transaction sees them, and they have no subscriptions yet. */
  created: Set<string>;
}

/**
 * Locks the existing subscribers among `ids` in one statement, in byte order (the order every statement locking
 * subscribers takes them: subscriber-lock-order.ts), and answers which exist.
 */
export async function lockSubscribers(
  trx: Transaction<Database>,
  organizationId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const { rows } = await sql<{ subscriber_id: string }>`
    SELECT subscriber_id FROM subscribers
    WHERE organization_id = ${organizationId} AND subscriber_id = ANY(${ids}::text[])
    ORDER BY subscriber_id COLLATE "C" FOR UPDATE
  `.execute(trx);
  return new Set(rows.map((row) => row.subscriber_id));
}

/**
 * Subscribers upserted by id in two statements: lines naming a `name` insert or rename (only when it differs); lines
 * without one insert or leave the subscriber as it is (PATCH's reading of an absent field). RETURNING tells applied
 * from unchanged. The version bump (versions.ts's rule, once per batch) is part of the same write: a created
 * subscriber starts at 1, a renamed one goes up by one, and the batch's end does not write those rows again.
 */
export async function applySubscribers(
  trx: Transaction<Database>,
  organizationId: string,
  lines: readonly Lined<SubscriberLine>[],
): Promise<SubscribersWritten> {
  const byId = lastById(lines, (record) => record.subscriber_id);
  const named: { id: string; name: string | null }[] = [];
  const unnamed: string[] = [];
  // In id order: a row another transaction is inserting with the same id is waited for in the order locks are taken.
  for (const [id, same] of [...byId].sort(([a], [b]) => bySubscriberId(a, b))) {
    // As the lines one after another would leave it: the last `name` given wins, a line without one keeps it.
    const lastNamed = same.findLast(({ record }) => record.name !== undefined)?.record;
    if (lastNamed?.name === undefined) unnamed.push(id);
    else named.push({ id, name: lastNamed.name });
  }
  const versions = new Map<string, number>();
  const created = new Set<string>();
  const written = (rows: readonly { subscriber_id: string; version: string; inserted: boolean }[]) => {
    for (const row of rows) {
      versions.set(row.subscriber_id, Number(row.version));
      if (row.inserted) created.add(row.subscriber_id);
    }
  };
  // xmax is 0 on a row this statement inserted, and this transaction's id on one it updated.
  if (named.length > 0) {
    const { rows } = await sql<{ subscriber_id: string; version: string; inserted: boolean }>`
      INSERT INTO subscribers (organization_id, subscriber_id, name, version)
      SELECT ${organizationId}, i.id, i.name, 1 FROM unnest(${named.map((n) => n.id)}::text[], ${named.map((n) => n.name)}::text[]) AS i(id, name)
      ON CONFLICT (organization_id, subscriber_id) DO UPDATE
        SET name = EXCLUDED.name, updated_at = now(), version = subscribers.version + 1
        WHERE subscribers.name IS DISTINCT FROM EXCLUDED.name
      RETURNING subscriber_id, version, xmax = 0 AS inserted
    `.execute(trx);
    written(rows);
  }
  if (unnamed.length > 0) {
    const { rows } = await sql<{ subscriber_id: string; version: string; inserted: boolean }>`
      INSERT INTO subscribers (organization_id, subscriber_id, version)
      SELECT ${organizationId}, i.id, 1 FROM unnest(${unnamed}::text[]) AS i(id)
      ON CONFLICT (organization_id, subscriber_id) DO NOTHING
      RETURNING subscriber_id, version, xmax = 0 AS inserted
    `.execute(trx);
    written(rows);
  }
  const results = new Map<number, AppliedResult>();
  for (const [id, same] of byId) {
    const result: AppliedResult = { result: versions.has(id) ? 'applied' : 'unchanged' };
    for (const { line } of same) results.set(line, result);
  }
  return { results, changed: new Set(versions.keys()), versions, created };
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
  nowMs: number,
  written: Pick<SubscribersWritten, 'versions' | 'created'> = { versions: new Map(), created: new Set() },
): Promise<BulkResult> {
  const named = [...new Set(lines.map((l) => l.record.subscriber_id))];
  // Rows the batch wrote are locked by that write already; the ones it created have no subscriptions to look up.
  const withSubscriptions = named.filter((id) => !written.created.has(id));
  const planKeys = [...new Set(lines.map((l) => l.record.plan_id))];
  const locked = await lockSubscribers(
    trx,
    organizationId,
    named.filter((id) => !written.versions.has(id)),
  );
  const { rows: plans } = await sql<{ id: string; key: string; archived: boolean }>`
    SELECT id, key, archived_at IS NOT NULL AS archived FROM plans
    WHERE organization_id = ${organizationId} AND key = ANY(${planKeys}::text[]) FOR SHARE
  `.execute(trx);
  const { rows: active } = await sql<{ subscriber_id: string; plan_id: string }>`
    SELECT subscriber_id, plan_id FROM subscriptions
    WHERE organization_id = ${organizationId} AND subscriber_id = ANY(${withSubscriptions}::text[]) AND status = 'active'
  `.execute(trx);
  const existing = new Set([...written.versions.keys(), ...locked]);
  const planByKey = new Map(plans.map((p) => [p.key, p]));
  const activePairs = new Set(active.map((a) => `${a.subscriber_id}\u0000${a.plan_id}`));
  const results = new Map<number, AppliedResult>();
  const created: { id: string; subscriberId: string; planId: string; anchoredAt: Date | null }[] = [];
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
    // Read as every date-time the API takes (a space separator included); an anchor is a past instant: periods
    // starting after now would answer a period that has not begun.
    const anchoredAtMs = record.anchored_at === undefined ? null : parseDateTime(record.anchored_at);
    if (anchoredAtMs !== null && anchoredAtMs > nowMs) {
      const error = validationError('anchored_at must not be in the future.', {
        field: 'anchored_at',
        value: record.anchored_at,
      });
      results.set(line, { result: 'failed', error });
      continue;
    }
    activePairs.add(pair);
    created.push({
      id: newId('sub'),
      subscriberId: record.subscriber_id,
      planId: plan.id,
      anchoredAt: anchoredAtMs === null ? null : new Date(anchoredAtMs),
    });
    results.set(line, { result: 'applied' });
  }
  if (created.length > 0) {
    await sql`
      INSERT INTO subscriptions (id, organization_id, subscriber_id, plan_id, anchored_at)
      SELECT c.id, ${organizationId}, c.subscriber_id, c.plan_id, COALESCE(c.anchored_at, now())
      FROM unnest(${created.map((c) => c.id)}::text[], ${created.map((c) => c.subscriberId)}::text[],
        ${created.map((c) => c.planId)}::text[], ${created.map((c) => c.anchoredAt)}::timestamptz[])
        AS c(id, subscriber_id, plan_id, anchored_at)
    `.execute(trx);
  }
  return { results, changed: new Set(created.map((c) => c.subscriberId)) };
}

/**
 * One version bump per changed subscriber (versions.ts's rule, for a batch at once; those in `bumped` were bumped by
 * their subscriber line's write already) and ONE outbox entry for all of them (kind `subscribers`): the relay
 * publishes the entry's subscribers from the current Postgres state, whatever their versions. The entry is due to the
 * relay after `relayAfterMs` only: the runner publishes it itself right after the commit, and the relay racing it
 * would publish every subscriber twice (it still does when the runner dies before publishing). Answers the entry's
 * id, which the runner marks done once it has published.
 */
export async function bumpSubscribers(
  trx: Transaction<Database>,
  organizationId: string,
  subscriberIds: readonly string[],
  bumped: Pick<ReadonlySet<string>, 'has'>,
  relayAfterMs: number,
): Promise<number> {
  const toBump = subscriberIds.filter((id) => !bumped.has(id)).sort();
  if (toBump.length > 0) {
    await sql`
      UPDATE subscribers SET version = version + 1, updated_at = now()
      WHERE organization_id = ${organizationId} AND subscriber_id = ANY(${toBump}::text[])
    `.execute(trx);
  }
  const { rows } = await sql<{ id: number }>`
    INSERT INTO outbox (organization_id, kind, subjects, version, next_attempt_at)
    VALUES (${organizationId}, 'subscribers', ${[...subscriberIds].sort()}::text[], 0,
      now() + make_interval(secs => ${relayAfterMs / 1000}))
    RETURNING id
  `.execute(trx);
  return Number(rows[0]!.id);
}
