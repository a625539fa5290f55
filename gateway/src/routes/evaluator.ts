import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import type { Principal, Scope } from '@ent/common/auth/scopes';
import { sessionTokenFromCookies } from '@ent/common/auth/session-token';
import { conflict, forbidden, notFound, rateLimited, serviceUnavailable } from '@ent/common/errors/app-error';
import {
  EvalGateUnavailableError,
  type EvalGateResult,
  type EvalUsageHeaders,
} from '@ent/common/metering/contract';
import { crossSiteRefusal } from '@ent/common/http/session-request';
import { periodOf } from '@ent/common/metering/period';
import { uncountedUsage } from '@ent/common/metering/usage';
import type { KnownKey } from '../plugins/principals.ts';
import type { SubscriberEntry } from '../plugins/snapshot-cache.ts';
import { ifNoneMatchMatches } from './etag.ts';
import { failureLimitAddress } from '@ent/common/http/local-client';

declare module 'fastify' {
  interface FastifyRequest {
    knownKey: KnownKey | null;
  }
  interface FastifyContextConfig {
    /** The scope the route's key must hold (its `authentication` hook checks it; the config says so to readers). */
    scope?: Scope;
  }
  interface FastifyInstance {
    evaluator: Evaluator;
  }
}

/** What an eval answers once its entitlements are known: a serialized body, or an error to throw. */
export type Answer = (entry: SubscriberEntry) => string;

export interface EvaluateOptions {
  /**
   * The answer's strong ETag (a SHA-256 over its content: etag.ts); a matching If-None-Match gets a 304, which
   * is not a 2xx and so not an eval (SPEC.md counts 2xx): it is refunded like any other non-2xx.
   */
  etag?: (entry: SubscriberEntry, body: string) => string;
  /** The error for a subscriber that does not exist (default: 404 NOT_FOUND). */
  unknownSubscriber?: (subscriberId: string) => Error;
}

export interface Evaluator {
  /**
   * An onRequest hook that resolves the key `keyOf` reads (401) and checks `scope` ("check" unless given; 403),
   * keeping the key on the request. A callback hook: a key already in memory costs no promise. A request with no
   * key at all (nor an Authorization header) may use the console's session cookie instead.
   */
  authentication(keyOf: (request: FastifyRequest) => string | undefined, scope?: Scope): onRequestHookHandler;
  /**
   * For a route that makes no gate call: the request's key as of the organization's auth version read from Redis
   * (401 once revoked, as an eval's gate call would find), and `scope` checked again (403).
   */
  confirmKey(request: FastifyRequest, authVersion: number, nowMs: number, scope: Scope): Promise<void>;
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

const JSON_TYPE = 'application/json; charset=utf-8';

/** The `X-API-Key` header (Node joins a repeated one with commas, which the key check refuses as malformed). */
export const xApiKeyOf = (request: FastifyRequest): string | undefined => {
  const header = request.headers['x-api-key'];
  return Array.isArray(header) ? header[0] : header;
};

function setUsageHeaders(reply: FastifyReply, usage: EvalUsageHeaders | null): void {
  if (!usage) return;
  reply.header('x-svc-eval-limit', usage.limit);
  reply.header('x-svc-eval-used', usage.used);
  if (usage.warn) reply.header('x-svc-eval-warn', usage.warn);
}

const refuseScope = (principal: Principal, scope: Scope = 'check') => {
  if (!principal.scopes.has(scope)) {
    throw forbidden(`This API key lacks the "${scope}" scope (or its member's role does not allow it).`);
  }
};

/**
 * The key as re-confirmed after the request began: it must still hold `scope` (403) and still belong to the
 * organization the request was begun for (else 503: the answer already read would be another's).
 */
function refuseChanged(current: KnownKey, organizationId: string, scope: Scope = 'check'): void {
  refuseScope(current.principal!, scope);
  if (current.principal!.organizationId !== organizationId) throw serviceUnavailable('Retry the request.');
}

const subscriberNotFound = (subscriberId: string) =>
  notFound(`No subscriber "${subscriberId}".`, { field: 'subscriber_id', value: subscriberId });

const blockedError = (period: string) =>
  conflict(`The organization's eval allotment for ${period} is exhausted and its grace period has ended.`, {
    field: 'evals',
    value: period,
  });

/**
 * Sends the answer with its usage headers, or a 304 when the client's If-None-Match already names it: a 304 is
 * refunded, so its headers count the month without it.
 */
function send(
  request: FastifyRequest,
  reply: FastifyReply,
  entry: SubscriberEntry,
  body: string,
  options: EvaluateOptions | undefined,
  usage: EvalUsageHeaders | null,
): void {
  if (options?.etag) {
    const etag = options.etag(entry, body);
    reply.header('etag', etag);
    if (ifNoneMatchMatches(request.headers['if-none-match'], etag)) {
      setUsageHeaders(reply, usage && uncountedUsage(usage));
      reply.code(304).send();
      return;
    }
  }
  setUsageHeaders(reply, usage);
  reply.type(JSON_TYPE).send(body);
}

/** Whether the answer went out 2xx (a 304 did not: it is refunded). */
const is2xx = (reply: FastifyReply) => reply.statusCode >= 200 && reply.statusCode < 300;

/**
 * The eval hot path shared by the eval routes and OFREP. Warm path: the key from the LRU, one Redis round trip
 * (the gate call meters the eval and returns the snapshot versions), the serialized answer from the LRU.
 * Postgres is never asked.
 */
export const evaluator = fp(
  async function evaluator(app: FastifyInstance) {
    const { principals, sessions, snapshotCache, evalMeter: meter, clock, gatewayMetrics: metrics } = app;
    /** Organizations whose last gate reply on this gateway was `blocked`, with its month: still 409 while Redis is down. */
    const blockedOrganizations = new Map<string, string>();
    const gateRoundTrips = metrics.redisRoundTrips.bind({ op: 'gate' });
    app.decorateRequest('knownKey', null);

    /** Undefined when decided at once (a key in memory), else the lookup under way. */
    function authenticate(
      request: FastifyRequest,
      key: string | undefined,
      scope: Scope,
    ): Promise<void> | undefined {
      const known = key === undefined ? undefined : principals.known(key);
      if (known) {
        refuseScope(known.principal!, scope);
        request.knownKey = known;
        return undefined;
      }
      return principals.authenticate(key, request).then((looked) => {
        refuseScope(looked.principal!, scope);
        request.knownKey = looked;
      });
    }

    /**
     * No key: the console's session cookie, checked with admin (401 without one), then for a write (the POST
     * routes) its origin and CSRF token (403), then `scope`.
     */
    function authenticateWithoutKey(request: FastifyRequest, scope: Scope): Promise<void> | undefined {
      const token =
        request.headers.authorization === undefined
          ? sessionTokenFromCookies(request.headers.cookie)
          : undefined;
      if (token === undefined) return authenticate(request, undefined, scope);
      return sessions.authenticate(token, failureLimitAddress(request)).then(({ known, csrfHash }) => {
        const crossSite = crossSiteRefusal(request, csrfHash);
        if (crossSite) throw forbidden(crossSite);
        refuseScope(known.principal!, scope);
        request.knownKey = known;
      });
    }

    const authentication: Evaluator['authentication'] = (keyOf, scope = 'check') =>
      function authenticateEval(request, _reply, done) {
        let pending: Promise<void> | undefined;
        try {
          const key = keyOf(request);
          pending =
            key === undefined ? authenticateWithoutKey(request, scope) : authenticate(request, key, scope);
        } catch (error) {
          return done(error as Error);
        }
        if (pending === undefined) done();
        else pending.then(() => done(), done);
      };

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
          await answerDegraded(request, reply, known, subscriberId, nowMs, answer, options);
          answered2xx = is2xx(reply);
          return;
        } finally {
          report?.(answered2xx);
        }
      }

      if (gate.outcome === 'blocked') blockedOrganizations.set(organizationId, gate.period);
      else if (gate.outcome === 'counted' && blockedOrganizations.size > 0)
        blockedOrganizations.delete(organizationId);
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

    /**
     * Redis unreachable (fail open): a key confirmed within KEY_CONFIRMATION_MS (else re-checked with admin),
     * an organization not last seen blocked, and a subscriber in the LRU are answered; others get 401, 409 or
     * 503. The burst is not enforced meanwhile (see docs/decisions.md, Failure modes).
     */
    async function answerDegraded(
      request: FastifyRequest,
      reply: FastifyReply,
      known: KnownKey,
      subscriberId: string,
      nowMs: number,
      answer: Answer,
      options: EvaluateOptions | undefined,
    ): Promise<void> {
      const organizationId = known.principal!.organizationId;
      refuseChanged(await principals.confirmWithoutRedis(known, nowMs), organizationId);
      const blockedIn = blockedOrganizations.get(organizationId);
      if (blockedIn !== undefined && blockedIn === periodOf(nowMs)) throw blockedError(blockedIn);
      const entry = snapshotCache.cached(organizationId, subscriberId, nowMs);
      if (!entry || !entry.subscriber.exists) {
        throw serviceUnavailable('Entitlements cannot be evaluated right now; retry shortly.');
      }
      send(request, reply, entry, answer(entry), options, null);
    }

    async function confirmKey(
      request: FastifyRequest,
      authVersion: number,
      nowMs: number,
      scope: Scope,
    ): Promise<void> {
      const known = request.knownKey!;
      refuseChanged(
        await principals.confirm(known, authVersion, nowMs),
        known.principal!.organizationId,
        scope,
      );
    }

    app.decorate('evaluator', { authentication, evaluate, confirmKey });
  },
  {
    name: 'evaluator',
    dependencies: ['infrastructure', 'metrics', 'principals', 'sessions', 'snapshot-cache', 'meter'],
  },
);
