import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';

/** A balance as the worker last persisted it: used, and what credits covered of it and the rollover (issue 35). */
export interface PersistedFigure {
  used: number;
  covered: number;
  rollover: number;
}

/** What Postgres holds of one subscriber's balances of these periods, by `feature|periodStartMs`. */
export async function persistedFigures(
  db: Kysely<Database>,
  organizationId: string,
  subscriberId: string,
  balances: readonly { feature: string; periodStartMs: number }[],
): Promise<Map<string, PersistedFigure>> {
  const figures = new Map<string, PersistedFigure>();
  if (balances.length === 0) return figures;
  const rows = await db
    .selectFrom('metered_usage')
    .select(['feature_key', 'period_start', 'used', 'covered', 'rollover'])
    .where('organization_id', '=', organizationId)
    .where('subscriber_id', '=', subscriberId)
    .where((eb) =>
      eb.or(
        balances.map((balance) =>
          eb.and([
            eb('feature_key', '=', balance.feature),
            eb('period_start', '=', new Date(balance.periodStartMs)),
          ]),
        ),
      ),
    )
    .execute();
  for (const row of rows)
    figures.set(`${row.feature_key}|${row.period_start.getTime()}`, {
      used: row.used,
      covered: row.covered,
      rollover: row.rollover,
    });
  return figures;
}
