import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { AppError, validationError } from '@ent/common/errors/app-error';
import type { CatalogLimits } from '../shared/catalog-limits.ts';
import { WriteOutcome } from '../shared/write/outcome.ts';
import { createFeature, findFeature, updateFeature } from '../features/service.ts';
import { createPlan, findPlan, setPlanArchived, updatePlan } from '../plans/service.ts';
import { upsertOverride } from '../overrides/service.ts';
import type {
  CreditLine,
  FeatureLine,
  ImportRecordLine,
  OverrideLine,
  PlanLine,
  SubscriberLine,
  SubscriptionLine,
} from '@ent/contract/import-lines';
import type { AppliedResult } from './results.ts';
import {
  applySubscribers,
  applySubscriptions,
  bumpSubscribers,
  lockSubscribers,
  type SubscribersWritten,
} from './bulk-subscribers.ts';
import { applyCredits, type CreditSpentSeed } from './bulk-credits.ts';
import { subscribersToLockFirst } from './subscriber-lock-order.ts';

export interface BatchLine {
  line: number;
  record: ImportRecordLine;
}

export interface BatchOutcome {
  results: Map<number, AppliedResult>;
  catalogChanged: boolean;
  subscribersChanged: Set<string>;
  /** The outbox entries (kind `subscribers`) naming what the bulk part changed: the runner marks them done. */
  subscriberEntries: number[];
  /** Spent figures of the credits the batch created, for Redis before the batch commits (runner.ts). */
  creditSeeds: CreditSpentSeed[];
}

export interface BatchContext {
  organizationId: string;
  catalogLimits: CatalogLimits;
  /** The batch's clock: a credit's defaults and the live credits it is counted against. */
  nowMs: number;
  /** How long the relay leaves the batch's subscriber outbox entries to the runner (bumpSubscribers). */
  relayAfterMs: number;
}

/** Record types in the order a batch applies them: each only refers to the ones before it. */
const ORDER: ImportRecordLine['type'][] = [
  'feature',
  'plan',
  'subscriber',
  'subscription',
  'override',
  'credit',
];

/**
 * A line applied by its single route's service, alone inside a savepoint: a refusal (AppError) undoes only that line
 * and becomes its result; anything else fails the whole batch.
 */
async function alone(
  trx: Transaction<Database>,
  batch: BatchOutcome,
  work: (outcome: WriteOutcome) => Promise<unknown>,
): Promise<AppliedResult> {
  const outcome = new WriteOutcome();
  await sql`SAVEPOINT import_line`.execute(trx);
  try {
    await work(outcome);
  } catch (error) {
    await sql`ROLLBACK TO SAVEPOINT import_line`.execute(trx);
    if (error instanceof AppError) return { result: 'failed', error };
    throw error;
  }
  await sql`RELEASE SAVEPOINT import_line`.execute(trx);
  if (outcome.details === null) return { result: 'unchanged' };
  if (outcome.catalogChanged) batch.catalogChanged = true;
  for (const id of outcome.subscribersChanged) batch.subscribersChanged.add(id);
  return { result: 'applied' };
}

const kindIsImmutable = (what: string, key: string, kind: string) =>
  validationError(`The ${what} "${key}" exists with kind "${kind}"; its kind cannot change.`, {
    field: 'kind',
    value: key,
    expected: kind,
  });

function applyFeature(trx: Transaction<Database>, batch: BatchOutcome, ctx: BatchContext, line: FeatureLine) {
  return alone(trx, batch, async (outcome) => {
    const { type: _type, ...body } = line;
    const existing = await findFeature(trx, ctx.organizationId, body.key);
    if (!existing) return createFeature(trx, outcome, ctx.organizationId, body, ctx.catalogLimits);
    if (existing.kind !== body.kind) throw kindIsImmutable('feature', body.key, existing.kind);
    return updateFeature(trx, outcome, ctx.organizationId, body.key, {
      name: body.name,
      ...(body.description === undefined ? {} : { description: body.description }),
    });
  });
}

/**
 * A feature or plan line whose key another transaction created between the line's look-up and its insert (two imports
 * of one catalog at once, or an import and `POST /org/features`): the insert waited for that transaction, met its
 * committed row and was refused as a duplicate key. The line is applied once more, now finding the row: an upsert
 * by natural key, as when the imports run one after the other.
 */
async function againIfMadeMeanwhile(apply: () => Promise<AppliedResult>): Promise<AppliedResult> {
  const first = await apply();
  const madeMeanwhile =
    first.result === 'failed' && first.error.code === 'CONFLICT' && first.error.details?.field === 'key';
  return madeMeanwhile ? apply() : first;
}

/**
 * A plan upserted by key. `archived: false` unarchives it at once; `archived: true` leaves the archiving to the end of
 * the import (runner.ts), after the import's subscriptions to it, so the line is applied while that is pending.
 */
async function applyPlan(trx: Transaction<Database>, batch: BatchOutcome, ctx: BatchContext, line: PlanLine) {
  let archiveLater = false;
  const result = await alone(trx, batch, async (outcome) => {
    const { type: _type, archived, ...body } = line;
    const existing = await findPlan(trx, ctx.organizationId, body.key);
    if (existing && existing.kind !== body.kind) throw kindIsImmutable('plan', body.key, existing.kind);
    const plan = existing
      ? await updatePlan(
          trx,
          outcome,
          ctx.organizationId,
          body.key,
          { name: body.name, ...(body.grants === undefined ? {} : { grants: body.grants }) },
          ctx.catalogLimits,
        )
      : await createPlan(trx, outcome, ctx.organizationId, body, ctx.catalogLimits);
    const isArchived = plan.plan.archived_at !== null;
    // Its details (the archived change) stand for the line's: the line changed something either way.
    if (archived === false && isArchived)
      await setPlanArchived(trx, outcome, ctx.organizationId, body.key, false);
    archiveLater = archived === true && !isArchived;
  });
  return result.result === 'unchanged' && archiveLater ? { result: 'applied' as const } : result;
}

/**
 * An override upserted through its service. Its subscriber is locked first, outside the line's savepoint: the service
 * locks it too, but a refusal rolls back to the savepoint and would let that lock go, while subscriber-lock-order.ts
 * counts it as held for the batch's later lines.
 */
async function applyOverride(
  trx: Transaction<Database>,
  batch: BatchOutcome,
  ctx: BatchContext,
  line: OverrideLine,
  locked: Set<string>,
) {
  if (!locked.has(line.subscriber_id)) {
    await lockSubscribers(trx, ctx.organizationId, [line.subscriber_id]);
    locked.add(line.subscriber_id);
  }
  return alone(trx, batch, async (outcome) => {
    const { type: _type, subscriber_id, feature_key, ...body } = line;
    return upsertOverride(trx, outcome, ctx.organizationId, subscriber_id, feature_key, body);
  });
}

/**
 * Applies one batch of validated lines in the caller's transaction: catalog records and overrides one by one through
 * their services (a catalog is small), subscribers, subscriptions and credits in bulk SQL (an organization's
 * million). Every line gets a result; a refused line changes nothing, the others apply (docs/decisions.md, "Bulk
 * import").
 */
export async function applyBatch(
  trx: Transaction<Database>,
  ctx: BatchContext,
  lines: readonly BatchLine[],
): Promise<BatchOutcome> {
  const batch: BatchOutcome = {
    results: new Map(),
    catalogChanged: false,
    subscribersChanged: new Set(),
    subscriberEntries: [],
    creditSeeds: [],
  };
  const byType = new Map<ImportRecordLine['type'], BatchLine[]>();
  for (const line of lines) {
    const group = byType.get(line.record.type) ?? [];
    group.push(line);
    byType.set(line.record.type, group);
  }
  const bulkChanged = new Set<string>();
  // What the subscriber lines wrote (version bump included) until the next flush: written once, not bumped again.
  const written: SubscribersWritten = {
    results: new Map(),
    changed: new Set(),
    versions: new Map(),
    created: new Set(),
  };
  // After the catalog lines: they lock plans, and the bulk part takes plans after subscribers only as a share.
  let lockedFirst = false;
  // Override lines' subscribers, locked outside each line's savepoint: a refused line keeps its lock.
  const overridesLocked = new Set<string>();
  for (const type of ORDER) {
    const group = byType.get(type);
    if (!group) continue;
    if (!lockedFirst && type !== 'feature' && type !== 'plan') {
      // Every existing subscriber the lines name, when locked here, needs no lock of its own before an override line.
      for (const id of await lockSubscribers(trx, ctx.organizationId, subscribersToLockFirst(byType)))
        overridesLocked.add(id);
      lockedFirst = true;
    }
    if (type === 'subscriber') {
      const applied = await applySubscribers(
        trx,
        ctx.organizationId,
        group.map(({ line, record }) => ({ line, record: record as SubscriberLine })),
      );
      mergeBulk(batch, bulkChanged, applied);
      written.versions = applied.versions;
      written.created = applied.created;
      continue;
    }
    if (type === 'subscription') {
      const applied = await applySubscriptions(
        trx,
        ctx.organizationId,
        group.map(({ line, record }) => ({ line, record: record as SubscriptionLine })),
        ctx.nowMs,
        written,
      );
      mergeBulk(batch, bulkChanged, applied);
      continue;
    }
    if (type === 'credit') {
      const applied = await applyCredits(
        trx,
        ctx.organizationId,
        group.map(({ line, record }) => ({ line, record: record as CreditLine })),
        ctx.nowMs,
      );
      mergeBulk(batch, bulkChanged, applied);
      batch.creditSeeds.push(...applied.seeds);
      continue;
    }
    if (bulkChanged.size > 0 && type === 'override') {
      // Overrides lock their subscriber through the service: bump what the bulk part changed first, in one go.
      await flushBulk(trx, ctx, batch, bulkChanged, written);
    }
    for (const { line, record } of group) {
      const result =
        record.type === 'feature'
          ? await againIfMadeMeanwhile(() => applyFeature(trx, batch, ctx, record))
          : record.type === 'plan'
            ? await againIfMadeMeanwhile(() => applyPlan(trx, batch, ctx, record))
            : await applyOverride(trx, batch, ctx, record as OverrideLine, overridesLocked);
      batch.results.set(line, result);
    }
  }
  await flushBulk(trx, ctx, batch, bulkChanged, written);
  return batch;
}

function mergeBulk(
  batch: BatchOutcome,
  bulkChanged: Set<string>,
  applied: { results: Map<number, AppliedResult>; changed: Set<string> },
) {
  for (const [line, result] of applied.results) batch.results.set(line, result);
  for (const id of applied.changed) bulkChanged.add(id);
}

async function flushBulk(
  trx: Transaction<Database>,
  ctx: BatchContext,
  batch: BatchOutcome,
  changed: Set<string>,
  written: SubscribersWritten,
) {
  if (changed.size === 0) return;
  batch.subscriberEntries.push(
    await bumpSubscribers(trx, ctx.organizationId, [...changed], written.versions, ctx.relayAfterMs),
  );
  for (const id of changed) batch.subscribersChanged.add(id);
  changed.clear();
  // Written rows are this transaction's still, but a later change to them (an override, a credit) bumps again.
  written.versions = new Map();
  written.created = new Set();
}
