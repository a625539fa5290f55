import { createDb } from '@ent/common/db/connect';
import type { Stack } from './stack.ts';

/**
 * An ended period of a metered feature, as the worker leaves it in Postgres when a period closes: last calendar
 * month with `used` as its final figure. Returns the period's start.
 */
export async function seedPastPeriod(
  stack: Stack,
  slug: string,
  period: { subscriberId: string; feature: string; used: number },
): Promise<Date> {
  const db = createDb(stack.databaseOwnerUrl, { max: 1 });
  try {
    const org = await db
      .selectFrom('organizations')
      .select('id')
      .where('slug', '=', slug)
      .executeTakeFirstOrThrow();
    const now = new Date();
    const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1));
    const end = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    await db
      .insertInto('metered_usage')
      .values({
        organization_id: org.id,
        subscriber_id: period.subscriberId,
        feature_key: period.feature,
        period_start: start,
        period_end: end,
        used: period.used,
        revision: 1,
      })
      .execute();
    return start;
  } finally {
    await db.destroy();
  }
}
