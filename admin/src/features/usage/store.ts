import { sql, type Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';

type Db = Kysely<Database>;

export interface OrganizationAllotment {
  id: string;
  /** Evals included per month now; null = unlimited. */
  eval_limit: number | null;
}

/** One page of every organization, by id (the sampling job walks them all in batches). */
export function organizationsAfter(
  db: Db,
  afterId: string | undefined,
  limit: number,
): Promise<OrganizationAllotment[]> {
  let query = db.selectFrom('organizations').select(['id', 'eval_limit']);
  if (afterId !== undefined) query = query.where('id', '>', afterId);
  return query.orderBy('id').limit(limit).execute();
}

export interface UsageDaySample {
  organization_id: string;
  /** `YYYY-MM-DD` (UTC). */
  day: string;
  period: string;
  count: number;
  eval_limit: number | null;
}

/**
 * Upserts one sample per (organization, day). The count only ever rises (GREATEST): a Redis that lost the usage
 * hash and counts again from zero must not lower a figure already recorded. `keepLimit` leaves the recorded
 * allotment of an existing row alone: a month's last day, sampled again after the month ended, keeps the
 * allotment it had then. An unchanged row is not rewritten, so a quiet minute costs no row version.
 */
export async function upsertUsageDays(
  db: Db,
  samples: readonly UsageDaySample[],
  options: { now: Date; keepLimit: boolean },
): Promise<void> {
  if (samples.length === 0) return;
  const { now, keepLimit } = options;
  await db
    .insertInto('usage_days')
    .values(samples.map((sample) => ({ ...sample, updated_at: now })))
    .onConflict((oc) =>
      oc
        .columns(['organization_id', 'day'])
        .doUpdateSet({
          count: sql<number>`GREATEST(usage_days.count, excluded.count)`,
          eval_limit: keepLimit
            ? sql<number | null>`usage_days.eval_limit`
            : sql<number | null>`excluded.eval_limit`,
          updated_at: now,
        })
        .where((eb) =>
          keepLimit
            ? eb('usage_days.count', '<', eb.ref('excluded.count'))
            : eb.or([
                eb('usage_days.count', '<', eb.ref('excluded.count')),
                eb('usage_days.eval_limit', 'is distinct from', eb.ref('excluded.eval_limit')),
              ]),
        ),
    )
    .execute();
}

export interface UsageDayRow {
  day: string;
  period: string;
  count: number;
  eval_limit: number | null;
}

/** The organization's samples from `fromDay` on, oldest first (`day` as `YYYY-MM-DD`). */
export function usageDaysFrom(db: Db, organizationId: string, fromDay: string): Promise<UsageDayRow[]> {
  return db
    .selectFrom('usage_days')
    .select([sql<string>`to_char(day, 'YYYY-MM-DD')`.as('day'), 'period', 'count', 'eval_limit'])
    .where('organization_id', '=', organizationId)
    .where('day', '>=', fromDay)
    .orderBy('usage_days.day')
    .execute();
}
