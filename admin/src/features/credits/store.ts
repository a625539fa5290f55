import { sql, type Kysely, type Transaction } from 'kysely';
import { CREDIT_COLUMNS, keptCreditFigures } from '@ent/common/db/credit-columns';
import type { Credit, CreditSource, Database } from '@ent/common/db/database';

type Db = Kysely<Database> | Transaction<Database>;

/** A credit with the key of its feature: the API names features by key only. */
export type CreditWithFeature = Credit & { feature_key: string };

const withFeatureKey = (db: Db, organizationId: string) =>
  db
    .selectFrom('credits as c')
    .innerJoin('features as f', 'f.id', 'c.feature_id')
    .select([...CREDIT_COLUMNS, 'f.key as feature_key'])
    .where('c.organization_id', '=', organizationId);

export function findCredit(
  db: Db,
  organizationId: string,
  subscriberId: string,
  creditId: string,
): Promise<CreditWithFeature | undefined> {
  return withFeatureKey(db, organizationId)
    .where('c.subscriber_id', '=', subscriberId)
    .where('c.id', '=', creditId)
    .executeTakeFirst();
}

/** Credits not voided whose expiry is after `at`, scheduled ones included: what the gateway reads. */
export function countUnexpiredCredits(
  trx: Db,
  organizationId: string,
  subscriberId: string,
  featureId: string,
  at: Date,
): Promise<number> {
  return trx
    .selectFrom('credits')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('organization_id', '=', organizationId)
    .where('subscriber_id', '=', subscriberId)
    .where('feature_id', '=', featureId)
    .where('voided_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', at)]))
    .executeTakeFirstOrThrow()
    .then((row) => Number(row.count));
}

export interface CreditColumns {
  id: string;
  featureId: string;
  name: string | null;
  amount: number;
  priority: number;
  effectiveAt: Date;
  expiresAt: Date | null;
  source: CreditSource;
  sourcePeriodStart: Date | null;
  createdAt?: Date;
}

export function insertCredit(
  trx: Transaction<Database>,
  organizationId: string,
  subscriberId: string,
  columns: CreditColumns,
): Promise<Credit> {
  return trx
    .insertInto('credits')
    .values({
      id: columns.id,
      organization_id: organizationId,
      subscriber_id: subscriberId,
      feature_id: columns.featureId,
      name: columns.name,
      amount: columns.amount,
      priority: columns.priority,
      effective_at: columns.effectiveAt,
      expires_at: columns.expiresAt,
      source: columns.source,
      source_period_start: columns.sourcePeriodStart,
      ...(columns.createdAt ? { created_at: columns.createdAt } : {}),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Sets voided_at unless already set; answers the row as it is now, or undefined when it was voided already. */
export function voidCreditRow(
  trx: Transaction<Database>,
  organizationId: string,
  creditId: string,
  at: Date,
): Promise<Credit | undefined> {
  return trx
    .updateTable('credits')
    .set({ voided_at: at, ...keptCreditFigures('credits') })
    .where('organization_id', '=', organizationId)
    .where('id', '=', creditId)
    .where('voided_at', 'is', null)
    // The row keeps its figure from now on (keptCreditFigures), so its own `spent` is the credit's.
    .returningAll()
    .executeTakeFirst();
}

/** Which credits a list asks for, as far as the clock alone decides (spent and active also need the balance). */
export type CreditTimeFilter = 'voided' | 'expired' | 'scheduled' | 'unexpired';

export interface CreditListFilter {
  limit: number;
  startingAfter?: string | undefined;
  featureId?: string | undefined;
  time?: CreditTimeFilter | undefined;
  now: Date;
}

/** Newest first (created_at, then id, descending); fetches one extra row to tell whether another page follows. */
export function listCredits(
  db: Db,
  organizationId: string,
  subscriberId: string,
  filter: CreditListFilter,
): Promise<CreditWithFeature[]> {
  let query = withFeatureKey(db, organizationId).where('c.subscriber_id', '=', subscriberId);
  if (filter.featureId) query = query.where('c.feature_id', '=', filter.featureId);
  const { now } = filter;
  switch (filter.time) {
    case 'voided':
      query = query.where('c.voided_at', 'is not', null);
      break;
    case 'expired':
      query = query.where('c.voided_at', 'is', null).where('c.expires_at', '<=', now);
      break;
    case 'scheduled':
      query = query
        .where('c.voided_at', 'is', null)
        .where('c.effective_at', '>', now)
        .where((eb) => eb.or([eb('c.expires_at', 'is', null), eb('c.expires_at', '>', now)]));
      break;
    case 'unexpired':
      query = query
        .where('c.voided_at', 'is', null)
        .where('c.effective_at', '<=', now)
        .where((eb) => eb.or([eb('c.expires_at', 'is', null), eb('c.expires_at', '>', now)]));
      break;
    default:
      break;
  }
  if (filter.startingAfter !== undefined) {
    const cursor = db
      .selectFrom('credits')
      .select(['created_at', 'id'])
      .where('organization_id', '=', organizationId)
      .where('id', '=', filter.startingAfter);
    query = query.where(
      sql<boolean>`(c.created_at, c.id) < (SELECT created_at, id FROM (${cursor}) AS cursor)`,
    );
  }
  return query
    .orderBy('c.created_at', 'desc')
    .orderBy('c.id', 'desc')
    .limit(filter.limit + 1)
    .execute();
}
