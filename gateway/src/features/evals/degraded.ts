import type { FastifyReply, FastifyRequest } from 'fastify';
import { conflict, serviceUnavailable } from '@ent/common/errors/app-error';
import type { EvalGateResult } from '../../metering/contract.ts';
import { periodOf } from '@ent/common/metering/period';
import type { KnownKey, Principals } from '../../plugins/principals.ts';
import { send, type Answer, type EvaluateOptions } from '../shared/answer.ts';
import { refuseChanged } from './authentication.ts';
import type { SnapshotCache, SubscriberEntry } from './snapshot-cache.ts';

export const blockedError = (period: string) =>
  conflict(`The organization's eval allotment for ${period} is exhausted and its grace period has ended.`, {
    field: 'evals',
    value: period,
  });

export interface DegradedMode {
  /** Keeps what a gate reply said about the organization's block, for while Redis is unreachable. */
  noteGate(organizationId: string, gate: EvalGateResult): void;
  /**
   * Redis unreachable (fail open): a key confirmed within KEY_CONFIRMATION_MS (else re-checked with admin),
   * an organization not last seen blocked, and a subscriber in the LRU are answered; others get 401, 409 or
   * 503. The burst is not enforced meanwhile (see docs/decisions.md, Failure modes).
   */
  answer(
    request: FastifyRequest,
    reply: FastifyReply,
    known: KnownKey,
    subscriberId: string,
    nowMs: number,
    answer: Answer,
    options: EvaluateOptions | undefined,
    /** An error for an answer that cannot be given without Redis (metered use), checked once the entry is known. */
    refuse?: (entry: SubscriberEntry) => Error | null,
  ): Promise<void>;
}

export function degradedMode(principals: Principals, snapshotCache: SnapshotCache): DegradedMode {
  /** Organizations whose last gate reply on this gateway was `blocked`, with its month: still 409 while Redis is down. */
  const blockedOrganizations = new Map<string, string>();
  return {
    noteGate(organizationId, gate) {
      if (gate.outcome === 'blocked') blockedOrganizations.set(organizationId, gate.period);
      else if (gate.outcome === 'counted' && blockedOrganizations.size > 0)
        blockedOrganizations.delete(organizationId);
    },
    async answer(request, reply, known, subscriberId, nowMs, answer, options, refuse) {
      const organizationId = known.principal!.organizationId;
      refuseChanged(await principals.confirmWithoutRedis(known, nowMs), organizationId);
      const blockedIn = blockedOrganizations.get(organizationId);
      if (blockedIn !== undefined && blockedIn === periodOf(nowMs)) throw blockedError(blockedIn);
      const entry = snapshotCache.cached(organizationId, subscriberId, nowMs);
      if (!entry || !entry.subscriber.exists) {
        throw serviceUnavailable('Entitlements cannot be evaluated right now; retry shortly.');
      }
      const refused = refuse?.(entry);
      if (refused) throw refused;
      send(request, reply, entry, answer(entry), options, null);
    },
  };
}
