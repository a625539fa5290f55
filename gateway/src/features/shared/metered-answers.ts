import type { FastifyInstance } from 'fastify';
import { AppError, notFound, validationError } from '@ent/common/errors/app-error';
import type { RedisKeys } from '@ent/common/redis/keys';
import type { MeteredCheckResult } from '@ent/contract/evals';
import { meteredUnavailable } from '../../metering/metered-balances.ts';
import {
  answerOf,
  meteredOperation,
  type MeteredKind,
  type MeteredOperation,
  type MeteredOutcome,
} from '../../metering/metered-operations.ts';
import type { OperationTerms } from '../../metering/operation-terms.ts';
import { readCurrentVersions } from './current-versions.ts';
import type { SubscriberEntry } from './entries.ts';

/** One metered operation a request asks for, on the subscriber's entry as last resolved. */
export interface MeteredItem {
  subscriberId: string;
  entry: SubscriberEntry;
  feature: string;
  kind: MeteredKind;
  amount: number;
  idempotencyKey: string;
}

/** An item's answer: the check result (a replay: the first answer), or the error body it gets. */
export type MeteredAnswer = { result: MeteredCheckResult; replayed: boolean } | { error: AppError };

/**
 * Versions moved again under a redo this many times: the answer is a 503 to retry, not a guess. Any catalog write of
 * the organization (a feature's description too) or write of the subscriber moves them, between a redo's read of the
 * versions and its call: a probe writing 60 times a second got a 503 for about one consume in 5,000 with 3 tries.
 * Each try is one read and one call, and the request's deadline still bounds them.
 */
const ATTEMPTS = 8;

const idempotencyKeyReused = (key: string) =>
  new AppError(
    422,
    'IDEMPOTENCY_KEY_REUSED',
    'This idempotency key was used within 24 hours for another request (subscriber, feature, operation or amount).',
    { field: 'idempotency_key', value: key },
  );

export const notMetered = (feature: string, field: string) =>
  validationError(`Feature "${feature}" is not metered.`, { field, value: feature });

/** The operation of `item` as its entry resolves it at `nowMs` (`resolved`: its terms, when resolved already). */
export const operationOf = (
  item: MeteredItem,
  nowMs: number,
  keys: RedisKeys,
  organizationId: string,
  resolved?: OperationTerms,
): MeteredOperation =>
  meteredOperation(
    {
      catalog: item.entry.catalog.doc,
      subscriber: item.entry.subscriber,
      catalogVersion: item.entry.catalogVersion,
      subscriberVersion: item.entry.subscriberVersion,
      subscriberStamp: item.entry.verifiedStamp,
    },
    item.subscriberId,
    item.feature,
    item.kind,
    item.amount,
    nowMs,
    item.idempotencyKey,
    keys,
    organizationId,
    resolved,
  );

/** A final outcome's answer; undefined when the operation must be redone (stale, not ready, skipped). */
export function answerOfOutcome(op: MeteredOperation, outcome: MeteredOutcome): MeteredAnswer | undefined {
  switch (outcome.status) {
    case 'applied':
    case 'refused':
      return { result: answerOf(op, outcome), replayed: false };
    case 'replayed':
      return { result: outcome.answer, replayed: true };
    case 'key_reused':
      return { error: idempotencyKeyReused(op.idempotencyKey) };
    default:
      return undefined;
  }
}

/**
 * Applies `items` with the usage script, one call per round; an item whose snapshot moved meanwhile (stale) is
 * resolved again from the current versions and redone. Answers in the items' order. Throws a 503 when Redis fails.
 */
export async function applyMetered(
  app: Pick<FastifyInstance, 'snapshotCache' | 'meteredBalances' | 'redis' | 'redisKeys'>,
  organizationId: string,
  items: MeteredItem[],
  nowMs: number,
): Promise<MeteredAnswer[]> {
  const answers: MeteredAnswer[] = new Array(items.length);
  let pending = items.map((_, i) => i);
  for (let attempt = 1; pending.length > 0; attempt++) {
    if (attempt > ATTEMPTS) throw meteredUnavailable();
    const ops = pending.map((i) => operationOf(items[i]!, nowMs, app.redisKeys, organizationId));
    const outcomes = await app.meteredBalances.apply(organizationId, ops);
    const stale: number[] = [];
    pending.forEach((i, j) => {
      const answer = answerOfOutcome(ops[j]!, outcomes[j]!);
      if (answer) answers[i] = answer;
      else stale.push(i);
    });
    if (stale.length === 0) break;
    await refreshEntries(app, organizationId, items, stale, nowMs);
    pending = [];
    for (const i of stale) {
      const item = items[i]!;
      if (!item.entry.subscriber.exists) answers[i] = { error: unknownSubscriber(item.subscriberId) };
      else if (item.entry.catalog.doc.features[item.feature] !== 'metered')
        answers[i] = { error: notMetered(item.feature, 'feature') };
      else pending.push(i);
    }
  }
  return answers;
}

export const unknownSubscriber = (subscriberId: string) =>
  notFound(`No subscriber "${subscriberId}".`, { field: 'subscriber_id', value: subscriberId });

/** Re-resolves the entries of `indexes` at the organization's current versions. */
async function refreshEntries(
  app: Pick<FastifyInstance, 'snapshotCache' | 'redis' | 'redisKeys'>,
  organizationId: string,
  items: MeteredItem[],
  indexes: number[],
  nowMs: number,
): Promise<void> {
  const ids = [...new Set(indexes.map((i) => items[i]!.subscriberId))];
  let current;
  try {
    current = await readCurrentVersions(app.redis, app.redisKeys, organizationId, ids);
  } catch (error) {
    throw Object.assign(meteredUnavailable(), { cause: error });
  }
  const entries = new Map<string, SubscriberEntry>();
  await Promise.all(
    ids.map(async (id, k) => {
      entries.set(
        id,
        await app.snapshotCache.entitlements(organizationId, id, current.subscribers[k]!, nowMs, undefined),
      );
    }),
  );
  for (const i of indexes) items[i]!.entry = entries.get(items[i]!.subscriberId)!;
}
