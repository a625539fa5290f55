import { dayOf, periodOf, periodStartMs } from '@ent/common/metering/period';
import type { RedisClient } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import type { JobDefinition, JobDependencies } from '../../jobs/job.ts';
import {
  organizationsAfter,
  upsertUsageDays,
  type OrganizationAllotment,
  type UsageDaySample,
} from './store.ts';

declare module '../../jobs/queues.ts' {
  interface QueuePayloads {
    /** Repeatable: sample every organization's eval count of the month from Redis into usage_days. */
    'usage-history': Record<string, never>;
  }
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * For this long into a month the previous month's hash is read again and its last day's sample raised: counts
 * can still land in it after midnight (a gateway that failed open adds its local counts when Redis returns).
 * The hash itself lives 35 days past its month (period.ts), far longer.
 */
const PREVIOUS_MONTH_WINDOW_MS = 3 * DAY_MS;

export interface UsageHistoryOptions {
  /** Organizations read from Postgres, and usage hashes from Redis, per batch. */
  batchSize: number;
}

const defaultUsageHistoryOptions: UsageHistoryOptions = { batchSize: 500 };

export interface UsageHistoryResult {
  organizations: number;
  /** Samples offered to Postgres (unchanged ones write nothing). */
  samples: number;
}

/**
 * The month's counts of a batch of organizations: one HMGET each, sent together (the client auto-pipelines,
 * per node on a cluster, where one pipeline could not span the organizations' slots). null: no hash, so
 * nothing was counted this month, or Redis lost it; either way there is nothing to record.
 */
async function countsOf(
  redis: Pick<RedisClient, 'hmget'>,
  keyOf: (organizationId: string) => string,
  organizations: readonly OrganizationAllotment[],
): Promise<(number | null)[]> {
  const replies = await Promise.all(organizations.map((org) => redis.hmget(keyOf(org.id), 'count')));
  return replies.map(([count]) => (count ? Number(count) : null));
}

function samplesOf(
  organizations: readonly OrganizationAllotment[],
  counts: readonly (number | null)[],
  day: string,
  period: string,
): UsageDaySample[] {
  return organizations.flatMap((org, i) => {
    const count = counts[i];
    if (count === null || count === undefined) return [];
    return [{ organization_id: org.id, day, period, count, eval_limit: org.eval_limit }];
  });
}

/**
 * Records every organization's eval count of the current UTC month as today's sample (usage_days), reading
 * the gate's usage hash without touching the eval hot path. In the first days of a month it also raises the
 * previous month's last day from that month's hash, so the final figure includes what arrived late.
 */
export async function recordUsageHistory(
  deps: Pick<JobDependencies, 'db' | 'redis' | 'clock' | 'config'>,
  overrides: Partial<UsageHistoryOptions> = {},
): Promise<UsageHistoryResult> {
  const { batchSize } = { ...defaultUsageHistoryOptions, ...overrides };
  const keys = redisKeys(deps.config.redisKeyPrefix);
  const nowMs = deps.clock.now();
  const now = new Date(nowMs);
  const period = periodOf(nowMs);
  const today = dayOf(nowMs);
  const monthStart = periodStartMs(nowMs);
  // The last millisecond of the previous month names both its period and its last day.
  const previous =
    nowMs - monthStart < PREVIOUS_MONTH_WINDOW_MS
      ? { period: new Date(monthStart - 1).toISOString().slice(0, 7), day: dayOf(monthStart - 1) }
      : null;

  const result: UsageHistoryResult = { organizations: 0, samples: 0 };
  let after: string | undefined;
  for (;;) {
    const organizations = await organizationsAfter(deps.db, after, batchSize);
    if (organizations.length === 0) break;
    result.organizations += organizations.length;

    const counts = await countsOf(deps.redis, (id) => keys.evalUsage(id, period), organizations);
    const current = samplesOf(organizations, counts, today, period);
    await upsertUsageDays(deps.db, current, { now, keepLimit: false });
    result.samples += current.length;

    if (previous) {
      const lastCounts = await countsOf(
        deps.redis,
        (id) => keys.evalUsage(id, previous.period),
        organizations,
      );
      const last = samplesOf(organizations, lastCounts, previous.day, previous.period);
      await upsertUsageDays(deps.db, last, { now, keepLimit: true });
      result.samples += last.length;
    }

    if (organizations.length < batchSize) break;
    after = organizations[organizations.length - 1]!.id;
  }
  return result;
}

export const usageHistoryJob: JobDefinition<'usage-history'> = {
  queue: 'usage-history',
  processor: (deps) => async () => recordUsageHistory(deps),
  concurrency: 1,
  repeatEveryMs: 60_000,
  repeatPayload: {},
};
