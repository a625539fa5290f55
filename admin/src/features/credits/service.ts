import type { Kysely, Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { notFound, validationError } from '@ent/common/errors/app-error';
import { parseDateTime } from '@ent/common/http/date-time';
import { newId } from '@ent/common/ids';
import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';
import {
  DEFAULT_CREDIT_PRIORITY,
  MAX_LIVE_CREDITS_PER_FEATURE,
  type CreateCreditBody,
  type CreditBody,
  type CreditStatus,
} from '@ent/contract/credits';
import { findFeature } from '../features/service.ts';
import { paginate, type Page } from '../shared/pagination.ts';
import { bumpSubscriberVersion } from '../shared/versions.ts';
import type { WriteOutcome } from '../shared/write/outcome.ts';
import { findSubscriber, lockSubscriber, subscriberNotFound } from '../subscribers/service.ts';
import { creditStatus, toCreditBody } from './body.ts';
import { currentSpent } from './spent.ts';
import {
  countUnexpiredCredits,
  findCredit,
  insertCredit,
  listCredits,
  voidCreditRow,
  type CreditTimeFilter,
  type CreditWithFeature,
} from './store.ts';

export interface CreditDeps {
  db: Kysely<Database>;
  redis: RedisClient;
  redisKeys: RedisKeys;
}

const creditNotFound = (subscriberId: string, creditId: string) =>
  notFound(`The subscriber "${subscriberId}" has no credit "${creditId}".`, {
    field: 'credit_id',
    value: creditId,
  });

function instantOf(value: string, field: string): Date {
  const ms = parseDateTime(value);
  if (Number.isNaN(ms))
    throw validationError(`${field} is not a valid ISO 8601 timestamp.`, { field, value });
  return new Date(ms);
}

/** The audit log's record of a created credit (SPEC.md "Details by write": a create names what it created). */
const createdDetails = (credit: CreditWithFeature) => ({
  credit_id: credit.id,
  feature: credit.feature_key,
  amount: credit.amount,
  priority: credit.priority,
  effective_at: credit.effective_at.toISOString(),
  expires_at: credit.expires_at ? credit.expires_at.toISOString() : null,
  name: credit.name,
});

/**
 * Creates a manual credit inside the caller's transaction: the route's write, and an import's line (which brings its
 * own transaction and outcome). Locks the subscriber (so the live-credit count holds), bumps its version (the
 * gateway sees the credit on its next eval: read-your-writes) and raises `credit.created`.
 * 404 for an unknown subscriber; 422 for a feature that is unknown or not metered, an expiry not after the
 * effective instant, or one live credit too many on the feature.
 */
export async function createCredit(
  trx: Transaction<Database>,
  outcome: WriteOutcome,
  organizationId: string,
  subscriberId: string,
  body: CreateCreditBody,
  nowMs: number,
): Promise<CreditWithFeature> {
  const effectiveAt =
    body.effective_at === undefined ? new Date(nowMs) : instantOf(body.effective_at, 'effective_at');
  const expiresAt = body.expires_at == null ? null : instantOf(body.expires_at, 'expires_at');
  if (expiresAt && expiresAt.getTime() <= effectiveAt.getTime()) {
    throw validationError('expires_at must be later than effective_at.', {
      field: 'expires_at',
      value: body.expires_at,
      effective_at: effectiveAt.toISOString(),
    });
  }
  if (!(await lockSubscriber(trx, organizationId, subscriberId))) throw subscriberNotFound(subscriberId);
  const feature = await findFeature(trx, organizationId, body.feature);
  if (!feature)
    throw validationError(`No feature with key "${body.feature}".`, {
      field: 'feature',
      value: body.feature,
    });
  if (feature.kind !== 'metered') {
    throw validationError(
      `The feature "${feature.key}" is a ${feature.kind} feature; credits are for metered features only.`,
      { field: 'feature', value: body.feature },
    );
  }
  const live = await countUnexpiredCredits(trx, organizationId, subscriberId, feature.id, new Date(nowMs));
  if (live >= MAX_LIVE_CREDITS_PER_FEATURE) {
    throw validationError(
      `The subscriber "${subscriberId}" already holds ${live} credits on "${feature.key}" that are not voided ` +
        `or expired, the most it may (${MAX_LIVE_CREDITS_PER_FEATURE}); void one first.`,
      { field: 'feature', value: body.feature, limit: MAX_LIVE_CREDITS_PER_FEATURE },
    );
  }
  const row = await insertCredit(trx, organizationId, subscriberId, {
    id: newId('cr'),
    featureId: feature.id,
    name: body.name ?? null,
    amount: body.amount,
    priority: body.priority ?? DEFAULT_CREDIT_PRIORITY,
    effectiveAt,
    expiresAt,
    source: 'manual',
    sourcePeriodStart: null,
  });
  await bumpSubscriberVersion(trx, outcome, organizationId, subscriberId);
  const credit = { ...row, feature_key: feature.key };
  outcome.details = createdDetails(credit);
  outcome.raise('credit.created', { credit: toCreditBody(credit, 0, nowMs) });
  return credit;
}

/**
 * Voids a credit: from now on nothing more is spent from it, and what was spent stays spent. Voiding a voided
 * credit changes nothing (details null, no second event). 404 for an unknown subscriber or credit. Answers the
 * credit as the API shows it, its spent figure read (from Redis where it holds one) inside the write.
 */
export async function voidCredit(
  trx: Transaction<Database>,
  outcome: WriteOutcome,
  deps: Omit<CreditDeps, 'db'>,
  organizationId: string,
  subscriberId: string,
  creditId: string,
  nowMs: number,
): Promise<CreditBody> {
  if (!(await lockSubscriber(trx, organizationId, subscriberId))) throw subscriberNotFound(subscriberId);
  const existing = await findCredit(trx, organizationId, subscriberId, creditId);
  if (!existing) throw creditNotFound(subscriberId, creditId);
  const bodyOf = async (credit: CreditWithFeature) => {
    const spent = await currentSpent(deps.redis, deps.redisKeys, organizationId, [credit]);
    return toCreditBody(credit, spent.get(credit.id) ?? credit.spent, nowMs);
  };
  if (existing.voided_at !== null) {
    outcome.unchangedOn({ subscriber: subscriberId });
    return bodyOf(existing);
  }
  const voided = await voidCreditRow(trx, organizationId, creditId, new Date(nowMs));
  if (!voided) throw creditNotFound(subscriberId, creditId);
  await bumpSubscriberVersion(trx, outcome, organizationId, subscriberId);
  const body = await bodyOf({ ...voided, feature_key: existing.feature_key });
  outcome.details = { credit_id: body.credit_id, voided_at: { from: null, to: body.voided_at } };
  outcome.raise('credit.voided', { credit: body });
  return body;
}

/** One credit as the API shows it, its spent figure read from Redis where it holds one. */
export async function creditBodies(
  deps: CreditDeps,
  organizationId: string,
  credits: readonly CreditWithFeature[],
  nowMs: number,
): Promise<CreditBody[]> {
  const spent = await currentSpent(deps.redis, deps.redisKeys, organizationId, credits);
  return credits.map((credit) => toCreditBody(credit, spent.get(credit.id) ?? credit.spent, nowMs));
}

/** What the clock alone decides of a status filter; spent and active also need the balance. */
const timeFilterOf = (status: CreditStatus | undefined): CreditTimeFilter | undefined => {
  if (status === undefined) return undefined;
  if (status === 'spent' || status === 'active') return 'unexpired';
  return status;
};

export interface CreditListRequest {
  limit?: number | undefined;
  startingAfter?: string | undefined;
  feature?: string | undefined;
  status?: CreditStatus | undefined;
}

/**
 * One page of a subscriber's credits, newest first, with their current figures. `spent` and `active` are told
 * apart by the balance: those candidates (not voided, effective, not expired: at most
 * MAX_LIVE_CREDITS_PER_FEATURE per feature) are read whole and filtered before the page is cut.
 */
export async function listSubscriberCredits(
  deps: CreditDeps,
  organizationId: string,
  subscriberId: string,
  request: CreditListRequest,
  nowMs: number,
): Promise<Page<CreditBody>> {
  const { db } = deps;
  if (!(await findSubscriber(db, organizationId, subscriberId))) throw subscriberNotFound(subscriberId);
  let featureId: string | undefined;
  if (request.feature !== undefined) {
    const feature = await findFeature(db, organizationId, request.feature);
    if (!feature) {
      throw validationError(`No feature with key "${request.feature}".`, {
        field: 'feature',
        value: request.feature,
      });
    }
    featureId = feature.id;
  }
  const now = new Date(nowMs);
  const byBalance = request.status === 'spent' || request.status === 'active';
  const page = await paginate(
    { limit: request.limit, startingAfter: request.startingAfter },
    {
      find: (creditId) => findCredit(db, organizationId, subscriberId, creditId),
      what: "the id of one of this subscriber's credits",
    },
    async (filter) => {
      const rows = await listCredits(db, organizationId, subscriberId, {
        limit: byBalance ? Number.MAX_SAFE_INTEGER - 1 : filter.limit,
        startingAfter: filter.startingAfter,
        featureId,
        time: timeFilterOf(request.status),
        now,
      });
      const spent = await currentSpent(deps.redis, deps.redisKeys, organizationId, rows);
      const bodies = rows.map((row) => ({ row, spent: spent.get(row.id) ?? row.spent }));
      const kept = byBalance
        ? bodies.filter((entry) => creditStatus(entry.row, entry.spent, nowMs) === request.status)
        : bodies;
      return kept.slice(0, filter.limit + 1).map((entry) => toCreditBody(entry.row, entry.spent, nowMs));
    },
  );
  return page;
}

/** One credit (for the void route's answer and tests). */
export async function getCredit(
  deps: CreditDeps,
  organizationId: string,
  subscriberId: string,
  creditId: string,
  nowMs: number,
): Promise<CreditBody> {
  if (!(await findSubscriber(deps.db, organizationId, subscriberId))) throw subscriberNotFound(subscriberId);
  const credit = await findCredit(deps.db, organizationId, subscriberId, creditId);
  if (!credit) throw creditNotFound(subscriberId, creditId);
  const [body] = await creditBodies(deps, organizationId, [credit], nowMs);
  return body!;
}
