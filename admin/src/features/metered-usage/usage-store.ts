import type { Kysely, Transaction } from 'kysely';
import type { Database, FeatureKind } from '@ent/common/db/database';

type Db = Kysely<Database> | Transaction<Database>;

export interface UsagePeriodRow {
  feature_key: string;
  period_start: Date;
  period_end: Date | null;
  used: number;
}

export async function featureKindOf(
  db: Db,
  organizationId: string,
  feature: string,
): Promise<FeatureKind | undefined> {
  const row = await db
    .selectFrom('features')
    .select('kind')
    .where('organization_id', '=', organizationId)
    .where('key', '=', feature)
    .executeTakeFirst();
  return row?.kind;
}

export interface BalanceKey {
  organizationId: string;
  subscriberId: string;
  feature: string;
  periodStart: Date;
}

const balanceRows = (db: Db, key: Omit<BalanceKey, 'periodStart'>) =>
  db
    .selectFrom('metered_usage')
    .where('organization_id', '=', key.organizationId)
    .where('subscriber_id', '=', key.subscriberId)
    .where('feature_key', '=', key.feature);

/** What Postgres holds for one balance; undefined when it holds no row. */
export const findDurableBalance = (db: Db, key: BalanceKey) =>
  balanceRows(db, key)
    .select(['used', 'revision'])
    .where('period_start', '=', key.periodStart)
    .executeTakeFirst();

export interface UsagePeriodFilter {
  limit: number;
  startingAfter?: string | undefined;
  /** The current period, which is not a past one. */
  currentStart: Date;
}

export const findPastPeriod = (db: Db, key: BalanceKey, currentStart: Date) =>
  balanceRows(db, key)
    .select('period_start')
    .where('period_start', '=', key.periodStart)
    .where('period_start', '<>', currentStart)
    .executeTakeFirst();

/** Newest first, `limit + 1` rows (the extra one says whether another page follows). */
export function listPastPeriods(
  db: Db,
  key: Omit<BalanceKey, 'periodStart'>,
  filter: UsagePeriodFilter,
): Promise<UsagePeriodRow[]> {
  let query = balanceRows(db, key)
    .select(['feature_key', 'period_start', 'period_end', 'used'])
    .where('period_start', '<>', filter.currentStart);
  if (filter.startingAfter !== undefined)
    query = query.where('period_start', '<', new Date(filter.startingAfter));
  return query
    .orderBy('period_start', 'desc')
    .limit(filter.limit + 1)
    .execute();
}
