import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError, notFound, validationError } from '@ent/common/errors/app-error';
import type { Scope } from '@ent/common/auth/scopes';
import type { UsageEvent } from '@ent/contract/metered-usage';
import { meteredUnavailable } from '../../metering/metered-balances.ts';
import { readCurrentVersions } from '../shared/current-versions.ts';
import type { SubscriberEntry } from '../shared/entries.ts';
import {
  applyMetered,
  notMetered,
  unknownSubscriber,
  type MeteredAnswer,
  type MeteredItem,
} from '../shared/metered-answers.ts';

type Gateway = Pick<
  FastifyInstance,
  'snapshotCache' | 'meteredBalances' | 'redis' | 'redisKeys' | 'evaluator'
>;

/** The subscribers' entries at the organization's current versions, after the key is confirmed at them. */
export async function currentEntries(
  app: Gateway,
  request: FastifyRequest,
  organizationId: string,
  subscriberIds: readonly string[],
  nowMs: number,
  scope: Scope,
): Promise<Map<string, SubscriberEntry>> {
  let current;
  try {
    current = await readCurrentVersions(app.redis, app.redisKeys, organizationId, subscriberIds);
  } catch (error) {
    request.log.warn({ err: error }, 'metered usage: Redis unreachable');
    throw meteredUnavailable();
  }
  await app.evaluator.confirmKey(request, current.auth, nowMs, scope);
  const entries = new Map<string, SubscriberEntry>();
  await Promise.all(
    subscriberIds.map(async (id, i) => {
      const held = app.snapshotCache.cached(organizationId, id, nowMs);
      entries.set(
        id,
        await app.snapshotCache.entitlements(organizationId, id, current.subscribers[i]!, nowMs, held),
      );
    }),
  );
  return entries;
}

/** Exactly one of `delta` (not 0) and `set`: the event as a metered item's kind and amount, or its error. */
function operationOfEvent(
  event: Pick<UsageEvent, 'delta' | 'set'>,
): { kind: 'd' | 's'; amount: number } | AppError {
  if (event.delta !== undefined && event.set !== undefined)
    return validationError('Give either "delta" or "set", not both.', { field: 'set' });
  if (event.set !== undefined) return { kind: 's', amount: event.set };
  if (event.delta === undefined) return validationError('Give "delta" or "set".', { field: 'delta' });
  if (event.delta === 0) return validationError('"delta" must not be 0.', { field: 'delta', value: 0 });
  return { kind: 'd', amount: event.delta };
}

/**
 * Usage reports (DESIGN.md §5): each event checked against its subscriber's entry, then every valid one applied
 * with one usage-script call. Not evals. Answers in the events' order: a check result or the error it gets.
 */
export async function applyUsageEvents(
  app: Gateway,
  request: FastifyRequest,
  organizationId: string,
  events: readonly UsageEvent[],
  nowMs: number,
): Promise<MeteredAnswer[]> {
  const ids = [...new Set(events.map((event) => event.subscriber_id))];
  const entries = await currentEntries(app, request, organizationId, ids, nowMs, 'usage:write');
  const answers: MeteredAnswer[] = new Array(events.length);
  const items: MeteredItem[] = [];
  const at: number[] = [];
  events.forEach((event, i) => {
    const entry = entries.get(event.subscriber_id)!;
    const operation = operationOfEvent(event);
    const kind = entry.catalog.doc.features[event.feature];
    if (operation instanceof AppError) answers[i] = { error: operation };
    else if (!entry.subscriber.exists) answers[i] = { error: unknownSubscriber(event.subscriber_id) };
    else if (kind === undefined)
      answers[i] = {
        error: notFound(`No feature with key "${event.feature}".`, {
          field: 'feature',
          value: event.feature,
        }),
      };
    else if (kind !== 'metered') answers[i] = { error: notMetered(event.feature, 'feature') };
    else {
      items.push({
        subscriberId: event.subscriber_id,
        entry,
        feature: event.feature,
        kind: operation.kind,
        amount: operation.amount,
        idempotencyKey: event.idempotency_key ?? '',
      });
      at.push(i);
    }
  });
  const applied = await applyMetered(app, organizationId, items, nowMs);
  applied.forEach((answer, k) => (answers[at[k]!] = answer));
  return answers;
}
