import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { notFound, rateLimited } from '@ent/common/errors/app-error';
import { EvalGateUnavailableError, type EvalGateResult } from '../../metering/contract.ts';
import { is2xx, send, setUsageHeaders, type Answer, type EvaluateOptions } from '../shared/answer.ts';
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

/**
 * The eval hot path shared by the eval routes and OFREP. Warm path: the key from the LRU, one Redis round trip
 * (the gate call meters the eval and returns the snapshot versions), the serialized answer from the LRU.
 * Postgres is never asked. Who the caller is: authentication.ts; Redis unreachable: degraded.ts.
 */
export const evaluator = fp(
  async function evaluator(app: FastifyInstance) {
    const { principals, sessions, snapshotCache, evalMeter: meter, clock, gatewayMetrics: metrics } = app;
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
      try {
        gateRoundTrips.inc();
        // Its verified stamp (0 when never verified) spares Redis reading its version while no subscriber changed.
        held = snapshotCache.cached(organizationId, subscriberId, nowMs);
        gate = await meter.gate({ organizationId, subscriberId, nowMs, verified: held });
      } catch (error) {
        metrics.redisErrors.inc({ op: 'gate' });
        request.log.warn({ err: error }, 'eval gate failed; answering from the LRU if possible');
        // Every eval of a failed call reports its answer exactly once, so the call can be settled exactly.
        const report = error instanceof EvalGateUnavailableError ? error.report : null;
        let answered2xx = false;
        try {
          await degraded.answer(request, reply, known, subscriberId, nowMs, answer, options);
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
        send(request, reply, entry, answer(entry), options, gate.usage);
        // Never rejects: a refund Redis does not take now is settled later.
        if (counted && !is2xx(reply)) void meter.refund(organizationId, nowMs);
      } catch (error) {
        if (counted) void meter.refund(organizationId, nowMs);
        throw error;
      }
    }

    app.decorate('evaluator', { ...requestAuthentication(principals, sessions), evaluate });
  },
  {
    name: 'evaluator',
    dependencies: ['infrastructure', 'gateway-metrics', 'principals', 'sessions', 'snapshot-cache', 'meter'],
  },
);
