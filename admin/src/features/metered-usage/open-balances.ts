import type { Kysely } from 'kysely';
import {
  BALANCE_AFTER_PERIOD_MS,
  BALANCE_SETTLED_AFTER_PERIOD_MS,
} from '@ent/common/metering/metered-period';
import { creditSpentNow } from '@ent/common/db/credit-columns';
import type { Database } from '@ent/common/db/database';

/** One persisted balance as a gateway's refill takes it. */
export interface OpenBalance {
  subscriber_id: string;
  feature: string;
  period_start_ms: number;
  period_end_ms: number | null;
  used: number;
  revision: number;
  /** What credits covered of `used` (issue 35). */
  covered: number;
  /** The period's rollover amount. */
  rollover: number;
}

/** What a credit has spent, as Postgres knows it (`credit_spent_now`): a refill puts it back into the credit-spent hash. */
export interface PersistedCreditSpent {
  subscriber_id: string;
  feature: string;
  credit_id: string;
  spent: number;
}

export interface RefillFigures {
  balances: OpenBalance[];
  credits: PersistedCreditSpent[];
}

/**
 * What a gateway puts back into a Redis that came back without the organization's balances (DESIGN.md §5):
 * - every balance whose period has not ended at `now`, with what credits covered and its rollover;
 * - for a feature some grant rolls over, each subscriber's latest ended period still kept in Redis (35 days):
 *   the balance a period's first touch reads to make its rollover, which would otherwise read as unused;
 * - what each credit has spent, where it spent something: the live ones, and those voided or expired while balances
 *   that may have spent them are still kept in Redis.
 * The worker writes a balance and the spent figures of its credits from one read of Redis in one transaction, so
 * these are figures of one instant per balance. Ended periods otherwise stay in Postgres only.
 */
/** What a refill puts back of each balance. */
const BALANCE_COLUMNS = [
  'subscriber_id',
  'feature_key',
  'period_start',
  'period_end',
  'used',
  'revision',
  'covered',
  'rollover',
] as const;

export async function refillFigures(
  db: Kysely<Database>,
  organizationId: string,
  now: Date,
  /** Only this subscriber's balances and credits of this feature (a correction's own), else the organization's. */
  owner?: { subscriberId: string; feature: string },
): Promise<RefillFigures> {
  const rolloverFeatures = db
    .selectFrom('plan_grants')
    .innerJoin('features', 'features.id', 'plan_grants.feature_id')
    .select('features.key')
    .where('features.organization_id', '=', organizationId)
    .where('plan_grants.rollover_max', 'is not', null);
  const recently = new Date(now.getTime() - BALANCE_SETTLED_AFTER_PERIOD_MS);
  const [open, ended, credits] = await Promise.all([
    db
      .selectFrom('metered_usage')
      .select(BALANCE_COLUMNS)
      .where('organization_id', '=', organizationId)
      .$if(owner !== undefined, (q) =>
        q.where('subscriber_id', '=', owner!.subscriberId).where('feature_key', '=', owner!.feature),
      )
      .where((eb) => eb.or([eb('period_end', 'is', null), eb('period_end', '>', now)]))
      .execute(),
    db
      .selectFrom('metered_usage')
      .select(BALANCE_COLUMNS)
      .distinctOn(['subscriber_id', 'feature_key'])
      .where('organization_id', '=', organizationId)
      .$if(owner !== undefined, (q) =>
        q.where('subscriber_id', '=', owner!.subscriberId).where('feature_key', '=', owner!.feature),
      )
      .where('feature_key', 'in', rolloverFeatures)
      .where('period_end', '<=', now)
      .where('period_end', '>', new Date(now.getTime() - BALANCE_AFTER_PERIOD_MS))
      .orderBy('subscriber_id')
      .orderBy('feature_key')
      .orderBy('period_start', 'desc')
      .execute(),
    db
      .selectFrom('credits as c')
      .innerJoin('features', 'features.id', 'c.feature_id')
      .select(['c.subscriber_id', 'features.key as feature', 'c.id as credit_id', creditSpentNow])
      .where('c.organization_id', '=', organizationId)
      .$if(owner !== undefined, (q) =>
        q.where('c.subscriber_id', '=', owner!.subscriberId).where('features.key', '=', owner!.feature),
      )
      // Credits that can no longer be spent too, while rows of balances still in Redis may name them: a hash put back
      // without them would drop them from those rows' next writes (decisions.md, "A credit's spent, persisted in its
      // balance's row").
      .where((eb) => eb.or([eb('c.voided_at', 'is', null), eb('c.voided_at', '>', recently)]))
      .where((eb) => eb.or([eb('c.expires_at', 'is', null), eb('c.expires_at', '>', recently)]))
      .execute(),
  ]);
  return {
    balances: [...open, ...ended].map((row) => ({
      subscriber_id: row.subscriber_id,
      feature: row.feature_key,
      period_start_ms: row.period_start.getTime(),
      period_end_ms: row.period_end === null ? null : row.period_end.getTime(),
      used: row.used,
      revision: row.revision,
      covered: row.covered,
      rollover: row.rollover,
    })),
    // What spent nothing needs no figure in Redis (an absent one reads as 0).
    credits: credits
      .filter((row) => row.spent > 0)
      .map((row) => ({
        subscriber_id: row.subscriber_id,
        feature: row.feature,
        credit_id: row.credit_id,
        spent: row.spent,
      })),
  };
}
