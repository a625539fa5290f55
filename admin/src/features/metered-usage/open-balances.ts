import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';

/** One persisted balance whose period has not ended, as a gateway's refill takes it. */
export interface OpenBalance {
  subscriber_id: string;
  feature: string;
  period_start_ms: number;
  period_end_ms: number | null;
  used: number;
  revision: number;
}

/**
 * Every balance of the organization whose period has not ended at `now` (DESIGN.md §5): what a gateway puts back
 * into a Redis that came back without them. Ended periods stay in Postgres only.
 */
export async function openBalances(
  db: Kysely<Database>,
  organizationId: string,
  now: Date,
): Promise<OpenBalance[]> {
  const rows = await db
    .selectFrom('metered_usage')
    .select(['subscriber_id', 'feature_key', 'period_start', 'period_end', 'used', 'revision'])
    .where('organization_id', '=', organizationId)
    .where((eb) => eb.or([eb('period_end', 'is', null), eb('period_end', '>', now)]))
    .execute();
  return rows.map((row) => ({
    subscriber_id: row.subscriber_id,
    feature: row.feature_key,
    period_start_ms: row.period_start.getTime(),
    period_end_ms: row.period_end === null ? null : row.period_end.getTime(),
    // bigint columns arrive as strings.
    used: Number(row.used),
    revision: Number(row.revision),
  }));
}
