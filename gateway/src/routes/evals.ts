import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Principal } from '@ent/common/auth/scopes';
import { conflict, forbidden, notFound, rateLimited, serviceUnavailable } from '@ent/common/errors/app-error';
import { EvalGateUnavailableError, type EvalGateResult, type EvalUsageHeaders } from '@ent/common/metering/contract';
import { periodOf } from '@ent/common/metering/period';
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

const blockedError = (period: string) =>
  conflict(`The organization's eval allotment for ${period} is exhausted and its grace period has ended.`, {
    field: 'evals',
    value: period,
  });

/**
 * The two eval routes. Warm path: the key from the LRU, one Redis round trip (the gate call meters the
 * eval and returns the snapshot versions), the serialized answer from the LRU. Postgres is never asked.
 */
export async function evalRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { principals, snapshotCache, evalMeter: meter, clock, gatewayMetrics: metrics } = app;
  /** Organizations whose last gate reply on this gateway was `blocked`, with its month: still 409 while Redis is down. */
  const blockedOrganizations = new Map<string, string>();

  const gateRoundTrips = metrics.redisRoundTrips.bind({ op: 'gate' });
  app.decorateRequest('knownKey', null);
  const authenticate = async (request: FastifyRequest) => {
    const header = request.headers['x-api-key'];
    const known = await principals.authenticate(Array.isArray(header) ? header[0] : header, request.ip);
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
      // Every eval of a failed call reports its answer exactly once, so the call can be settled exactly.
      const report = error instanceof EvalGateUnavailableError ? error.report : null;
      let answered2xx = false;
      try {
        const sent = await answerDegraded(reply, known, subscriberId, nowMs, answer);
        answered2xx = true;
        return sent;
      } finally {
        report?.(answered2xx);
      }
    }

    if (gate.outcome === 'blocked') blockedOrganizations.set(organizationId, gate.period);
    else if (gate.outcome === 'counted' && blockedOrganizations.size > 0) blockedOrganizations.delete(organizationId);
    const counted = gate.outcome === 'counted';
    try {
      const current = await principals.confirm(known, gate.versions.auth, nowMs);
      refuseScope(current.principal!);
      if (current.principal!.organizationId !== organizationId) throw serviceUnavailable('Retry the request.');
      if (gate.outcome === 'rate_limited') throw rateLimited(gate.retryAfterSeconds);
      if (gate.outcome === 'blocked') {
        setUsageHeaders(reply, gate.usage);
        throw blockedError(gate.period);
      }
      const entry = await snapshotCache.entitlements(organizationId, subscriberId, gate.versions, nowMs);
      if (!entry.subscriber.exists) throw subscriberNotFound(subscriberId);
      const body = answer(entry);
      setUsageHeaders(reply, gate.usage);
      return reply.type(JSON_TYPE).send(body);
    } catch (error) {
      // Never rejects: a refund Redis does not take now is settled later.
      if (counted) void meter.refund(organizationId, nowMs);
      throw error;
    }
  }

  /**
   * Redis unreachable (fail open): a key confirmed within KEY_CONFIRMATION_MS (else re-checked with admin),
   * an organization not last seen blocked, and a subscriber in the LRU are answered; others get 401, 409 or
   * 503. The burst is not enforced meanwhile (see docs/decisions.md, Failure modes).
   */
  async function answerDegraded(reply: FastifyReply, known: KnownKey, subscriberId: string, nowMs: number, answer: Answer) {
    const current = await principals.confirmWithoutRedis(known, nowMs);
    refuseScope(current.principal!);
    const organizationId = known.principal!.organizationId;
    if (current.principal!.organizationId !== organizationId) throw serviceUnavailable('Retry the request.');
    const blockedIn = blockedOrganizations.get(organizationId);
    if (blockedIn !== undefined && blockedIn === periodOf(nowMs)) throw blockedError(blockedIn);
    const entry = snapshotCache.cached(organizationId, subscriberId, nowMs);
    if (!entry || !entry.subscriber.exists) {
      throw serviceUnavailable('Entitlements cannot be evaluated right now; retry shortly.');
    }
    return reply.type(JSON_TYPE).send(answer(entry));
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
