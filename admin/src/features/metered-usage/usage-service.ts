import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { notFound, validationError } from '@ent/common/errors/app-error';
import { buildCreditsSpec } from '@ent/common/metering/credit-spec';
import type { MeteredPeriod } from '@ent/common/metering/metered-period';
import {
  meteredPeriodOf,
  meteredResult,
  meteredTermsOf,
  type MeteredTerms,
} from '@ent/common/resolve/resolve';
import { buildCatalog, buildSubscribers } from '@ent/common/snapshots/build';
import type { SubscriberDoc } from '@ent/common/snapshots/documents';
import type { MeteredCheckResult } from '@ent/contract/evals';
import type { UsagePeriodBody } from '@ent/contract/metered-usage';
import { paginate, type Page, type PageRequest } from '../shared/pagination.ts';
import type { WriteOutcome } from '../shared/write/outcome.ts';
import { getSubscriber } from '../subscribers/service.ts';
import {
  correctBalance,
  mergePersistedOwner,
  undoCorrection,
  type AppliedCorrection,
  type BalanceRef,
} from './balance-scripts.ts';
import { readBalanceFigures } from './balance-figures.ts';
import { refillFigures } from './open-balances.ts';
import {
  featureKindOf,
  findDurableBalance,
  findPastPeriod,
  listPastPeriods,
  type UsagePeriodFilter,
  type UsagePeriodRow,
} from './usage-store.ts';

type UsageDeps = Pick<FastifyInstance, 'db' | 'redis' | 'redisKeys' | 'clock'>;

const toUsagePeriodBody = (row: UsagePeriodRow): UsagePeriodBody => ({
  feature: row.feature_key,
  period_start: row.period_start.toISOString(),
  period_end: row.period_end === null ? null : row.period_end.toISOString(),
  used: row.used,
});

interface CurrentTerms {
  subscriber: SubscriberDoc;
  terms: MeteredTerms;
  period: MeteredPeriod;
  /** The balance's credits as the balance rule takes them (issue 35): a correction spends and gives back by them. */
  credits: string;
}

/**
 * The subscriber's terms for a metered feature now, from snapshots built from Postgres (what the gateway answers
 * from). 404 for an unknown subscriber or feature, 422 for a feature that is not metered.
 */
async function currentTerms(
  deps: UsageDeps,
  organizationId: string,
  subscriberId: string,
  feature: string,
  nowMs: number,
): Promise<CurrentTerms> {
  await getSubscriber(deps.db, organizationId, subscriberId);
  const kind = await featureKindOf(deps.db, organizationId, feature);
  if (kind === undefined)
    throw notFound(`No feature with key "${feature}".`, { field: 'feature', value: feature });
  if (kind !== 'metered')
    throw validationError(`Feature "${feature}" is a ${kind} feature, not a metered one: it has no usage.`, {
      field: 'feature',
      value: feature,
    });
  const [catalog, subscribers] = await Promise.all([
    buildCatalog(deps.db, organizationId),
    buildSubscribers(deps.db, organizationId, [subscriberId]),
  ]);
  const subscriber = subscribers.get(subscriberId)!.doc;
  const terms = meteredTermsOf(catalog!.doc, subscriber, feature, nowMs);
  const period = meteredPeriodOf(terms, nowMs);
  const { spec } = buildCreditsSpec(
    { catalog: catalog!.doc, subscriber },
    subscriberId,
    feature,
    terms,
    period,
    nowMs,
  );
  return { subscriber, terms, period, credits: spec };
}

/** Past periods of a subscriber's metered feature (every period but the current one), newest first, one page. */
export async function listUsagePeriods(
  deps: UsageDeps,
  organizationId: string,
  subscriberId: string,
  feature: string,
  request: PageRequest<Omit<UsagePeriodFilter, 'currentStart'> & { limit: number }>,
): Promise<Page<UsagePeriodBody>> {
  const { period } = await currentTerms(deps, organizationId, subscriberId, feature, deps.clock.now());
  const currentStart = new Date(period.startMs);
  const key = { organizationId, subscriberId, feature };
  const page = await paginate(
    { ...request, currentStart },
    {
      find: async (value) => {
        const periodStart = new Date(value);
        if (Number.isNaN(periodStart.getTime())) return undefined;
        return findPastPeriod(deps.db, { ...key, periodStart }, currentStart);
      },
      what: 'the period_start of a past period of this subscriber and feature',
    },
    (filter: UsagePeriodFilter) => listPastPeriods(deps.db, key, filter),
  );
  return { items: page.items.map(toUsagePeriodBody), hasMore: page.hasMore };
}

/** The write pipeline's `run` for this request. */
export type RunWrite = <T>(
  work: (trx: Transaction<Database>, outcome: WriteOutcome) => Promise<T>,
) => Promise<T>;

/**
 * A correction of the current period (DESIGN.md §5), audited from -> to. Redis is the copy every eval reads, so the
 * figure is set there inside the write's transaction, before its commit; a transaction that does not commit (the
 * write fails, or is run again as a deadlock victim) takes the correction back, so Redis never keeps a change whose
 * audit entry does not say it happened. The worker persists the corrected balance like any other change.
 */
export async function correctUsage(
  deps: UsageDeps,
  run: RunWrite,
  log: Pick<FastifyBaseLogger, 'error'>,
  organizationId: string,
  subscriberId: string,
  feature: string,
  used: number,
): Promise<MeteredCheckResult> {
  const nowMs = deps.clock.now();
  const { subscriber, terms, period, credits } = await currentTerms(
    deps,
    organizationId,
    subscriberId,
    feature,
    nowMs,
  );
  const balance: BalanceRef = {
    organizationId,
    subscriberId,
    feature,
    periodStartMs: period.startMs,
    periodEndMs: period.endMs,
  };
  let applied: AppliedCorrection | null = null;
  const takeBack = async () => {
    const correction = applied;
    applied = null;
    if (correction) await undoCorrection(deps.redis, deps.redisKeys, correction);
  };
  if ((await deps.redis.exists(deps.redisKeys.meteredReady(organizationId))) === 0)
    await mergePersistedOwner(
      deps.redis,
      deps.redisKeys,
      organizationId,
      await refillFigures(deps.db, organizationId, new Date(nowMs), { subscriberId, feature }),
      nowMs,
    );
  try {
    return await run(async (trx, outcome) => {
      await takeBack();
      const durable = await findDurableBalance(trx, { ...balance, periodStart: new Date(period.startMs) });
      applied = await correctBalance(deps.redis, deps.redisKeys, balance, used, durable ?? null, {
        limit: terms.limit,
        soft: terms.soft,
        credits,
        nowMs,
      });
      if (applied.revision !== null)
        outcome.details = {
          period_start: new Date(period.startMs).toISOString(),
          used: { from: applied.from, to: used },
        };
      // The credits as they stand after the correction, listed as a check lists them.
      const { figures } = await readBalanceFigures(
        { db: trx, redis: deps.redis, keys: deps.redisKeys },
        organizationId,
        subscriberId,
        subscriber,
        [{ feature, terms, period }],
        nowMs,
      );
      return meteredResult(feature, terms, period, used, undefined, figures[0]!.credits);
    });
  } catch (error) {
    await takeBack().catch((undoError: unknown) =>
      log.error(
        { err: undoError, organizationId, subscriberId, feature },
        'a usage correction that did not commit could not be taken back from Redis',
      ),
    );
    throw error;
  }
}
