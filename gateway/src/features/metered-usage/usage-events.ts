import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError, notFound, validationError } from '@ent/common/errors/app-error';
import type { Scope } from '@ent/common/auth/scopes';
import type { UsageEvent } from '@ent/contract/metered-usage';
import { meteredUnavailable } from '../../metering/metered-balances.ts';
import { readCurrentVersions } from '../shared/current-versions.ts';
import type { SubscriberEntry } from '../shared/entries.ts';
import type { SnapshotVersions } from '../../metering/contract.ts';
import {
  answerOfOutcome,
  applyMetered,
  notMetered,
  operationOf,
  unknownSubscriber,
  type MeteredAnswer,
  type MeteredItem,
} from '../shared/metered-answers.ts';
import { meteredCreditsOf, type MeteredOperation } from '../../metering/metered-operations.ts';
import { meteredResultIn } from '@ent/common/resolve/resolve';
import { operationTermsOf, type OperationTerms } from '../../metering/operation-terms.ts';

type Gateway = Pick<
  FastifyInstance,
  'snapshotCache' | 'meteredBalances' | 'redis' | 'redisKeys' | 'evaluator'
>;

/**
 * The subscribers' entries at the organization's current versions, after the key is confirmed at them. A held entry
 * verified at the subscriber-write stamp the others were (SubscriberEntry.verifiedStamp) is not asked about: while the
 * index holds that stamp, no subscriber's version has moved since (subscriber-put-2.lua), so a batch of subscribers
 * seen before reads the stamp, not a thousand versions. When the stamp moved, they are read too (a second round trip).
 */
export async function currentEntries(
  app: Gateway,
  request: FastifyRequest,
  organizationId: string,
  subscriberIds: readonly string[],
  nowMs: number,
  scope: Scope,
  taken?: Promise<void>,
): Promise<Map<string, SubscriberEntry>> {
  const held: (SubscriberEntry | undefined)[] = new Array(subscriberIds.length);
  let stamp = 0;
  for (let i = 0; i < subscriberIds.length; i++) {
    const entry = app.snapshotCache.cached(organizationId, subscriberIds[i]!, nowMs);
    held[i] = entry;
    if (stamp === 0 && entry !== undefined && entry.forgetAt === null) stamp = entry.verifiedStamp;
  }
  const trusted = (entry: SubscriberEntry | undefined): entry is SubscriberEntry =>
    stamp !== 0 && entry !== undefined && entry.forgetAt === null && entry.verifiedStamp === stamp;
  const asked = subscriberIds.filter((_, i) => !trusted(held[i]));
  const reading = readCurrentVersions(app.redis, app.redisKeys, organizationId, asked);
  if (taken) {
    // The rate's answer comes first (a 429 before anything else); the read is then already on its way.
    reading.catch(() => {});
    await taken;
  }
  const versionsOf = new Map<string, SnapshotVersions>();
  let current;
  try {
    current = await reading;
    if (current.subscriberStamp !== stamp && asked.length < subscriberIds.length) {
      current = await readCurrentVersions(app.redis, app.redisKeys, organizationId, subscriberIds);
      subscriberIds.forEach((id, i) => versionsOf.set(id, current!.subscribers[i]!));
    } else {
      asked.forEach((id, i) => versionsOf.set(id, current!.subscribers[i]!));
    }
  } catch (error) {
    request.log.warn({ err: error }, 'metered usage: Redis unreachable');
    throw meteredUnavailable();
  }
  await app.evaluator.confirmKey(request, current.auth, nowMs, scope);
  const entries = new Map<string, SubscriberEntry>();
  const loading: Promise<void>[] = [];
  subscriberIds.forEach((id, i) => {
    const entry = held[i];
    // A trusted entry's version is the index's: what reading it would have given.
    const versions = versionsOf.get(id) ?? {
      catalog: current.catalog,
      subscriber: entry!.subscriberVersion,
      auth: current.auth,
      subscriberStamp: current.subscriberStamp,
    };
    const made = app.snapshotCache.entitlements(organizationId, id, versions, nowMs, entry);
    // A cached entry answers at once: only the subscribers not held wait for their documents.
    if (made instanceof Promise) loading.push(made.then((loaded) => void entries.set(id, loaded)));
    else entries.set(id, made);
  });
  if (loading.length > 0) await Promise.all(loading);
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
 * `taken` is the organization's usage rate being taken meanwhile: it decides (a 429) before anything is applied.
 */
export async function applyUsageEvents(
  app: Gateway,
  request: FastifyRequest,
  organizationId: string,
  events: readonly UsageEvent[],
  nowMs: number,
  taken?: Promise<void>,
): Promise<MeteredAnswer[]> {
  const ids = [...new Set(events.map((event) => event.subscriber_id))];
  const entries = await currentEntries(app, request, organizationId, ids, nowMs, 'usage:write', taken);
  const answers: MeteredAnswer[] = new Array(events.length);
  const ops: MeteredOperation[] = [];
  const resolvedOf: OperationTerms[] = [];
  const at: number[] = [];
  for (let i = 0; i < events.length; i++) {
    const event = events[i]!;
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
      const resolved = operationTermsOf(entry.catalog.doc, entry.subscriber, event.feature, nowMs);
      const item: MeteredItem = {
        subscriberId: event.subscriber_id,
        entry,
        feature: event.feature,
        kind: operation.kind,
        amount: operation.amount,
        idempotencyKey: event.idempotency_key ?? '',
      };
      ops.push(operationOf(item, nowMs, app.redisKeys, organizationId, resolved));
      resolvedOf.push(resolved);
      at.push(i);
    }
  }
  const outcomes = await app.meteredBalances.apply(organizationId, ops);
  // Stale: the documents moved since the entries were read; those are resolved again and redone.
  const redo: MeteredItem[] = [];
  const redoAt: number[] = [];
  for (let k = 0; k < ops.length; k++) {
    const op = ops[k]!;
    const outcome = outcomes[k]!;
    if (outcome.status === 'applied' || outcome.status === 'refused') {
      const { terms, period } = resolvedOf[k]!;
      answers[at[k]!] = {
        result: meteredResultIn(
          op.feature,
          terms,
          period.startIso ?? new Date(period.startMs).toISOString(),
          period.endIso !== undefined
            ? period.endIso
            : period.endMs === null
              ? null
              : new Date(period.endMs).toISOString(),
          outcome.used,
          undefined,
          meteredCreditsOf(op.creditList, outcome.credits),
        ),
        replayed: false,
      };
      continue;
    }
    const answer = answerOfOutcome(op, outcome);
    if (answer) answers[at[k]!] = answer;
    else {
      const event = events[at[k]!]!;
      redo.push({
        subscriberId: op.subscriberId,
        entry: entries.get(op.subscriberId)!,
        feature: op.feature,
        kind: op.kind,
        amount: op.amount,
        idempotencyKey: event.idempotency_key ?? '',
      });
      redoAt.push(at[k]!);
    }
  }
  if (redo.length > 0) {
    const redone = await applyMetered(app, organizationId, redo, nowMs);
    redone.forEach((answer, k) => (answers[redoAt[k]!] = answer));
  }
  return answers;
}
