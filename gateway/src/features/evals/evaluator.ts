import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { notFound, rateLimited } from '@ent/common/errors/app-error';
import { EvalGateUnavailableError, type EvalGateResult } from '../../metering/contract.ts';
import {
  is2xx,
  OneMeteredAnswer,
  send,
  setUsageHeaders,
  type Answer,
  type EvaluateOptions,
  type MeteredRequest,
} from '../shared/answer.ts';
import type { CatalogEntry } from '../shared/entries.ts';
import {
  answerOfOutcome,
  applyMetered,
  operationOf,
  type MeteredAnswer,
  type MeteredItem,
} from '../shared/metered-answers.ts';
import { meteredUnavailable } from '../../metering/metered-balances.ts';
import type { MeteredOperation, MeteredOutcome } from '../../metering/metered-operations.ts';
import type { MeteredCheckResult } from '@ent/contract/evals';
import { refuseChanged, requestAuthentication, type RequestAuthentication } from './authentication.ts';
import { blockedError, degradedMode } from './degraded.ts';
import type { SubscriberEntry } from './snapshot-cache.ts';

declare module 'fastify' {
  interface FastifyInstance {
    evaluator: Evaluator;
  }
}

export interface Evaluator extends RequestAuthentication {
  /**
   * One eval: one gate call (metered, burst, block), the answer from the LRU, refunded unless it ends 2xx. It
   * sends the reply itself and resolves to nothing, so a route can hand Fastify this very promise from a plain
   * (not async) handler: no wrapper promise, and no resolution with the reply (a thenable), per eval.
   */
  evaluate(
    request: FastifyRequest,
    reply: FastifyReply,
    subscriberId: string,
    answer: Answer,
    options?: EvaluateOptions,
  ): Promise<void>;
}

const subscriberNotFound = (subscriberId: string) =>
  notFound(`No subscriber "${subscriberId}".`, { field: 'subscriber_id', value: subscriberId });

const NO_FEATURES: readonly string[] = [];

/** The metered features a request's answer holds, as `catalog` defines them. */
const meteredFeaturesOf = (catalog: CatalogEntry, metered: MeteredRequest): readonly string[] => {
  if (metered.feature === null) return catalog.meteredFeatures;
  return catalog.doc.features[metered.feature] === 'metered' ? [metered.feature] : NO_FEATURES;
};

const meteredItem = (
  entry: SubscriberEntry,
  subscriberId: string,
  metered: MeteredRequest,
  feature: string,
): MeteredItem => ({
  subscriberId,
  entry,
  feature,
  kind: metered.consume === undefined ? 'r' : 'c',
  amount: metered.consume ?? 0,
  idempotencyKey: metered.consume === undefined ? '' : metered.idempotencyKey,
});

/**
 * The eval hot path shared by the eval routes and OFREP. Warm path: the key from the LRU, one Redis round trip
 * (the gate call meters the eval and returns the snapshot versions), the serialized answer from the LRU.
 * Postgres is never asked. Who the caller is: authentication.ts; Redis unreachable: degraded.ts.
 */
export const evaluator = fp(
  async function evaluator(app: FastifyInstance) {
    const {
      principals,
      sessions,
      snapshotCache,
      evalMeter: meter,
      meteredBalances,
      clock,
      gatewayMetrics: metrics,
      redisKeys,
    } = app;
    const degraded = degradedMode(principals, snapshotCache);
    const gateRoundTrips = metrics.redisRoundTrips.bind({ op: 'gate' });
    app.decorateRequest('knownKey', null);

    async function evaluate(
      request: FastifyRequest,
      reply: FastifyReply,
      subscriberId: string,
      answer: Answer,
      options?: EvaluateOptions,
    ): Promise<void> {
      const known = request.knownKey!;
      const organizationId = known.principal!.organizationId;
      const nowMs = clock.now();

      let gate: EvalGateResult;
      let held: SubscriberEntry | undefined;
      const metered = options?.metered;
      let operations: MeteredOperation[] | undefined;
      // The metered features as the held entry's catalog defines them: the answer's, unless the catalog moved.
      let featuresCatalog: CatalogEntry | undefined;
      let features: readonly string[] = NO_FEATURES;
      try {
        gateRoundTrips.inc();
        // Its verified stamp (0 when never verified) spares Redis reading its version while no subscriber changed.
        held = snapshotCache.cached(organizationId, subscriberId, nowMs);
        if (metered !== undefined && held !== undefined && held.forgetAt === null) {
          featuresCatalog = held.catalog;
          features = meteredFeaturesOf(held.catalog, metered);
          if (features.length > 0) {
            operations = new Array<MeteredOperation>(features.length);
            for (let i = 0; i < features.length; i++)
              operations[i] = operationOf(
                meteredItem(held, subscriberId, metered, features[i]!),
                nowMs,
                redisKeys,
                organizationId,
              );
          }
        }
        gate = await meter.gate({ organizationId, subscriberId, nowMs, verified: held, metered: operations });
      } catch (error) {
        metrics.redisErrors.inc({ op: 'gate' });
        request.log.warn({ err: error }, 'eval gate failed; answering from the LRU if possible');
        // Every eval of a failed call reports its answer exactly once, so the call can be settled exactly.
        const report = error instanceof EvalGateUnavailableError ? error.report : null;
        let answered2xx = false;
        try {
          // A metered answer needs its use, and a consume must be exact: never failed open (DESIGN.md §5). Who the
          // caller is and whether the organization is blocked are answered first, as for every other eval.
          const refuseWithoutRedis =
            metered === undefined
              ? undefined
              : (entry: SubscriberEntry) =>
                  metered.consume !== undefined || meteredFeaturesOf(entry.catalog, metered).length > 0
                    ? meteredUnavailable()
                    : null;
          await degraded.answer(
            request,
            reply,
            known,
            subscriberId,
            nowMs,
            answer,
            options,
            refuseWithoutRedis,
          );
          answered2xx = is2xx(reply);
          return;
        } finally {
          report?.(answered2xx);
        }
      }

      degraded.noteGate(organizationId, gate);
      const counted = gate.outcome === 'counted';
      try {
        const confirmed = principals.confirm(known, gate.versions.auth, nowMs);
        refuseChanged(confirmed instanceof Promise ? await confirmed : confirmed, organizationId);
        if (gate.outcome === 'rate_limited') throw rateLimited(gate.retryAfterSeconds);
        if (gate.outcome === 'blocked') {
          setUsageHeaders(reply, gate.usage);
          throw blockedError(gate.period);
        }
        const cachedOrLoading = snapshotCache.entitlements(
          organizationId,
          subscriberId,
          gate.versions,
          nowMs,
          held,
        );
        const entry = cachedOrLoading instanceof Promise ? await cachedOrLoading : cachedOrLoading;
        if (!entry.subscriber.exists) throw (options?.unknownSubscriber ?? subscriberNotFound)(subscriberId);
        if (operations !== undefined && gate.metered !== undefined)
          meteredBalances.observe(organizationId, operations, gate.metered);
        if (metered !== undefined && entry.catalog !== featuresCatalog)
          features = meteredFeaturesOf(entry.catalog, metered);
        const made =
          metered === undefined || features.length === 0
            ? answer(entry)
            : meteredBody(
                reply,
                organizationId,
                subscriberId,
                entry,
                metered,
                features,
                operations,
                gate.metered,
                nowMs,
              );
        // Awaited only when something was applied again: the warm metered eval stays on the synchronous path.
        const body = typeof made === 'string' ? made : await made;
        send(request, reply, entry, body, options, gate.usage);
        // Never rejects: a refund Redis does not take now is settled later.
        if (counted && !is2xx(reply)) void meter.refund(organizationId, nowMs);
      } catch (error) {
        if (counted) void meter.refund(organizationId, nowMs);
        throw error;
      }
    }

    /**
     * The answer with its metered features' use: what the gate call applied when it ran against this entry's
     * versions, else applied now with the usage script (a snapshot that moved, a cold cache, a Redis to refill).
     */
    function meteredBody(
      reply: FastifyReply,
      organizationId: string,
      subscriberId: string,
      entry: SubscriberEntry,
      metered: MeteredRequest,
      features: readonly string[],
      operations: MeteredOperation[] | undefined,
      outcomes: MeteredOutcome[] | undefined,
      nowMs: number,
    ): string | Promise<string> {
      const answers: (MeteredAnswer | undefined)[] = new Array(features.length);
      let missing = 0;
      for (let i = 0; i < features.length; i++) {
        const feature = features[i]!;
        // Operations and items follow the catalog's metered features in the same order: the same index when the
        // entry did not change under the gate call.
        const index =
          operations?.[i]?.feature === feature
            ? i
            : (operations?.findIndex((op) => op.feature === feature) ?? -1);
        const op = operations?.[index];
        const outcome = outcomes?.[index];
        const current =
          op !== undefined &&
          outcome !== undefined &&
          op.catalogVersion === entry.catalogVersion &&
          op.subscriberVersion === entry.subscriberVersion;
        answers[i] = current ? answerOfOutcome(op, outcome) : undefined;
        if (answers[i] === undefined) missing += 1;
      }
      if (missing === 0) return render(reply, entry, metered, features, answers as MeteredAnswer[]);
      // Items are made only for what is applied again; the usage script may move them to a newer entry.
      const redo: MeteredItem[] = [];
      for (let i = 0; i < features.length; i++)
        if (answers[i] === undefined) redo.push(meteredItem(entry, subscriberId, metered, features[i]!));
      const firstRedone = answers[0] === undefined;
      return applyMetered(app, organizationId, redo, nowMs).then((redone) => {
        let k = 0;
        for (let i = 0; i < answers.length; i++) if (answers[i] === undefined) answers[i] = redone[k++];
        // Rendered with the entry the first metered feature was answered from (a redo may have moved it on).
        return render(
          reply,
          firstRedone ? redo[0]!.entry : entry,
          metered,
          features,
          answers as MeteredAnswer[],
        );
      });
    }

    /** The body from each metered feature's answer (an error answer is thrown). */
    function render(
      reply: FastifyReply,
      entry: SubscriberEntry,
      metered: MeteredRequest,
      features: readonly string[],
      answers: readonly MeteredAnswer[],
    ): string {
      let replayed = false;
      for (let i = 0; i < answers.length; i++) {
        const answer = answers[i]!;
        if ('error' in answer) throw answer.error;
        if (answer.replayed) replayed = true;
      }
      if (replayed) reply.header('idempotent-replayed', 'true');
      // Past the loop every answer is a result (an error was thrown).
      const results = answers as readonly { result: MeteredCheckResult }[];
      if (results.length === 1)
        return metered.render(entry, new OneMeteredAnswer(features[0]!, results[0]!.result));
      const byFeature = new Map<string, MeteredCheckResult>();
      for (let i = 0; i < results.length; i++) byFeature.set(features[i]!, results[i]!.result);
      return metered.render(entry, byFeature);
    }

    app.decorate('evaluator', { ...requestAuthentication(principals, sessions), evaluate });
  },
  {
    name: 'evaluator',
    dependencies: ['infrastructure', 'gateway-metrics', 'principals', 'sessions', 'snapshot-cache', 'meter'],
  },
);
