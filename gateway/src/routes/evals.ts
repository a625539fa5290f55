import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Principal } from '@ent/common/auth/scopes';
import { conflict, forbidden, notFound, rateLimited, serviceUnavailable } from '@ent/common/errors/app-error';
import type { EvalGateResult, EvalUsageHeaders } from '@ent/common/metering/contract';
import { listedEntitlements } from '@ent/common/resolve/resolve';
import { CheckBody, EntitlementsQuery, EvalParams } from '@ent/common/schemas/evals';
import type { KnownKey } from '../plugins/principals.ts';
import type { SubscriberEntry } from '../plugins/snapshot-cache.ts';

declare module 'fastify' {
  interface FastifyRequest {
    knownKey: KnownKey | null;
  }
}

const JSON_TYPE = 'application/json; charset=utf-8';

function setUsageHeaders(reply: FastifyReply, usage: EvalUsageHeaders | null): void {
  if (!usage) return;
  reply.header('x-svc-eval-limit', usage.limit);
  reply.header('x-svc-eval-used', usage.used);
  if (usage.warn) reply.header('x-svc-eval-warn', usage.warn);
}

const refuseScope = (principal: Principal) => {
  if (!principal.scopes.has('check')) {
    throw forbidden('This API key lacks the "check" scope (or its member\'s role does not allow it).');
  }
};

const subscriberNotFound = (subscriberId: string) =>
  notFound(`No subscriber "${subscriberId}".`, { field: 'subscriber_id', value: subscriberId });

/** What an eval answers once its entitlements are known: a serialized body, or an error to throw. */
type Answer = (entry: SubscriberEntry) => string;

/**
 * The two eval routes. Warm path: the key from the LRU, one Redis round trip (the gate call meters the
 * eval and returns the snapshot versions), the serialized answer from the LRU. Postgres is never asked.
 */
export async function evalRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { principals, snapshotCache, evalMeter: meter, offlineEvals, clock, gatewayMetrics: metrics } = app;

  const gateRoundTrips = metrics.redisRoundTrips.bind({ op: 'gate' });
  app.decorateRequest('knownKey', null);
  const authenticate = async (request: FastifyRequest) => {
    const header = request.headers['x-api-key'];
    const known = await principals.authenticate(Array.isArray(header) ? header[0] : header);
    refuseScope(known.principal!);
    request.knownKey = known;
  };

  async function evaluate(request: FastifyRequest, reply: FastifyReply, subscriberId: string, answer: Answer) {
    const known = request.knownKey!;
    const organizationId = known.principal!.organizationId;
    const nowMs = clock.now();

    let gate: EvalGateResult;
    try {
      gateRoundTrips.inc();
      gate = await meter.gate({ organizationId, subscriberId, nowMs });
    } catch (error) {
      metrics.redisErrors.inc({ op: 'gate' });
      request.log.warn({ err: error }, 'eval gate failed; answering from the LRU if possible');
      return answerDegraded(reply, organizationId, subscriberId, nowMs, answer);
    }

    const counted = gate.outcome === 'counted';
    try {
      const current = await principals.confirm(known, gate.versions.auth);
      refuseScope(current.principal!);
      if (current.principal!.organizationId !== organizationId) throw serviceUnavailable('Retry the request.');
      if (gate.outcome === 'rate_limited') throw rateLimited(gate.retryAfterSeconds);
      if (gate.outcome === 'blocked') {
        setUsageHeaders(reply, gate.usage);
        throw conflict(`The organization's eval allotment for ${gate.period} is exhausted and its grace period has ended.`, {
          field: 'evals',
          value: gate.period,
        });
      }
      const entry = await snapshotCache.entitlements(organizationId, subscriberId, gate.versions, nowMs);
      if (!entry.subscriber.exists) throw subscriberNotFound(subscriberId);
      const body = answer(entry);
      setUsageHeaders(reply, gate.usage);
      return reply.type(JSON_TYPE).send(body);
    } catch (error) {
      if (counted) {
        meter.refund(organizationId, nowMs).catch((refundError: unknown) => {
          request.log.error({ err: refundError }, 'eval refund failed');
        });
      }
      throw error;
    }
  }

  /** Redis unreachable: subscribers in the LRU are answered (fail open, counted locally); others 503. */
  function answerDegraded(reply: FastifyReply, organizationId: string, subscriberId: string, nowMs: number, answer: Answer) {
    const entry = snapshotCache.cached(organizationId, subscriberId, nowMs);
    if (!entry || !entry.subscriber.exists) {
      throw serviceUnavailable('Entitlements cannot be evaluated right now; retry shortly.');
    }
    const body = answer(entry);
    offlineEvals.add(organizationId);
    return reply.type(JSON_TYPE).send(body);
  }

  app.post(
    '/org/subscribers/:subscriber_id/entitlements/check',
    { config: { scope: 'check' }, onRequest: authenticate, schema: { params: EvalParams, body: CheckBody } },
    async (request, reply) => {
      const { feature } = request.body;
      return evaluate(request, reply, request.params.subscriber_id, (entry) => {
        let json = entry.json.get(feature);
        if (json === undefined) {
          const result = entry.resolved.byFeature.get(feature);
          if (!result) throw notFound(`No feature with key "${feature}".`, { field: 'feature', value: feature });
          json = JSON.stringify(result);
          entry.json.set(feature, json);
        }
        return json;
      });
    },
  );

  app.get(
    '/org/subscribers/:subscriber_id/entitlements',
    { config: { scope: 'check' }, onRequest: authenticate, schema: { params: EvalParams, querystring: EntitlementsQuery } },
    async (request, reply) => {
      const subscriberId = request.params.subscriber_id;
      const all = request.query.all === true;
      const cacheKey = all ? '\u0000all' : '\u0000granted';
      return evaluate(request, reply, subscriberId, (entry) => {
        let json = entry.json.get(cacheKey);
        if (json === undefined) {
          json = JSON.stringify({ subscriber_id: subscriberId, entitlements: listedEntitlements(entry.resolved, all) });
          entry.json.set(cacheKey, json);
        }
        return json;
      });
    },
  );
}
