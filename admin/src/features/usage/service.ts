import type { FastifyInstance } from 'fastify';
import { getArrangement } from '@ent/common/metering/arrangement';
import { dayOf, periodOf, periodsEndingAt } from '@ent/common/metering/period';
import { currentUsage, readUsageCounters, type UsageRecord } from '@ent/common/metering/usage';
import type { UsageHistoryBody, UsageMonthBody } from '@ent/contract/usage';
import { usageDaysFrom, type UsageDayRow } from './store.ts';

type UsageDeps = Pick<FastifyInstance, 'db' | 'redis' | 'redisKeys'>;

/** The month's usage: the arrangement from Postgres (the source of truth), the counters from Redis. */
export async function usageOf(deps: UsageDeps, organizationId: string, nowMs: number): Promise<UsageRecord> {
  const arrangement = await getArrangement(deps.db, organizationId);
  return currentUsage(deps.redis, deps.redisKeys, organizationId, arrangement, nowMs);
}

/** A past month from its samples: the count is cumulative, so the month's figure is its largest sample. */
function monthOf(period: string, rows: readonly UsageDayRow[]): UsageMonthBody {
  return {
    period,
    count: Math.max(0, ...rows.map((row) => row.count)),
    limit: rows[rows.length - 1]!.eval_limit,
    days: rows.map((row) => ({ date: row.day, count: row.count })),
  };
}

/**
 * The current month's figures never lag Redis: the sampling job runs once a minute, so the live count (and
 * today's point) is the larger of the two. Its allotment is the one that applies now.
 */
function withLiveCount(
  month: UsageMonthBody | undefined,
  current: { period: string; today: string; count: number; limit: number | null },
): UsageMonthBody {
  const days = (month?.days ?? []).filter((day) => day.date !== current.today);
  const sampledToday = month?.days.find((day) => day.date === current.today)?.count ?? 0;
  days.push({ date: current.today, count: Math.max(sampledToday, current.count) });
  return {
    period: current.period,
    count: Math.max(month?.count ?? 0, current.count),
    limit: current.limit,
    days,
  };
}

/**
 * The last `months` UTC months, newest first: the current month always, each earlier one when a sample of it
 * was recorded (usage_days, written by the usage-history job).
 */
export async function usageHistory(
  deps: UsageDeps,
  organizationId: string,
  months: number,
  nowMs: number,
): Promise<UsageHistoryBody> {
  const periods = periodsEndingAt(nowMs, months);
  const oldest = periods[periods.length - 1]!;
  const [rows, arrangement, counters] = await Promise.all([
    usageDaysFrom(deps.db, organizationId, `${oldest}-01`),
    getArrangement(deps.db, organizationId),
    readUsageCounters(deps.redis, deps.redisKeys, organizationId, nowMs),
  ]);
  const byPeriod = new Map<string, UsageDayRow[]>();
  for (const row of rows) byPeriod.set(row.period, [...(byPeriod.get(row.period) ?? []), row]);

  const period = periodOf(nowMs);
  const sampled = byPeriod.get(period);
  const current = withLiveCount(sampled ? monthOf(period, sampled) : undefined, {
    period,
    today: dayOf(nowMs),
    count: counters.count,
    limit: arrangement.evalLimit,
  });
  const past = periods.slice(1).flatMap((past) => {
    const pastRows = byPeriod.get(past);
    return pastRows ? [monthOf(past, pastRows)] : [];
  });
  return { months: [current, ...past] };
}
