import { createDb } from '@ent/common/db/connect';
import { createRedis } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import type { Stack } from './stack.ts';

const FREE_ALLOTMENT = 250_000;

const monthsBack = (now: Date, back: number) =>
  new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - back, 1));
const periodOf = (date: Date) => date.toISOString().slice(0, 7);
const lastDayOf = (first: Date) => new Date(Date.UTC(first.getUTCFullYear(), first.getUTCMonth() + 1, 0));

/**
 * A history worth looking at for the usage page (and its screenshot), as the usage-history job and the gate
 * would have left it: three earlier months in usage_days (one over its allotment), this month's earlier days
 * rising towards `count`, and the gate's count of this month in Redis at `count`. Returns the periods.
 */
export async function seedUsageHistory(stack: Stack, slug: string, count: number): Promise<string[]> {
  const db = createDb(stack.databaseOwnerUrl, { max: 1 });
  const redis = createRedis({ redisUrl: 'redis://127.0.0.1:6379', redisClusterNodes: [] });
  try {
    const org = await db
      .selectFrom('organizations')
      .select('id')
      .where('slug', '=', slug)
      .executeTakeFirstOrThrow();
    const now = new Date();
    const today = now.getUTCDate();
    const rows: { day: string; count: number }[] = [];
    // This month: a steady climb over the days before today (today's point is the live count).
    for (let day = 1; day < today; day++) {
      const date = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), day));
      rows.push({ day: date.toISOString().slice(0, 10), count: Math.round((count * day) / today) });
    }
    const finals = [143_210, 251_004, 98_765];
    const periods = [periodOf(now)];
    finals.forEach((final, i) => {
      const first = monthsBack(now, i + 1);
      periods.push(periodOf(first));
      const last = lastDayOf(first);
      rows.push({
        day: new Date(Date.UTC(first.getUTCFullYear(), first.getUTCMonth(), 15)).toISOString().slice(0, 10),
        count: Math.round(final / 2),
      });
      rows.push({ day: last.toISOString().slice(0, 10), count: final });
    });
    await db
      .insertInto('usage_days')
      .values(
        rows.map((row) => ({
          organization_id: org.id,
          ...row,
          period: row.day.slice(0, 7),
          eval_limit: FREE_ALLOTMENT,
        })),
      )
      .onConflict((oc) => oc.columns(['organization_id', 'day']).doNothing())
      .execute();
    const key = redisKeys(stack.redisPrefix).evalUsage(org.id, periodOf(now));
    await redis.hset(key, 'count', count);
    await redis.expire(key, 3600);
    return periods;
  } finally {
    await db.destroy();
    redis.disconnect();
  }
}
