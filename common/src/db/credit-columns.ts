import { sql } from 'kysely';

/**
 * A credit's columns as every reader selects them from `credits as c`: `spent` is what the credit has spent as
 * Postgres knows it, the latest of its own figure and those its balances' rows carry (`credit_spent_now`, migration
 * 2026-11-27T2000), never the column alone, which the worker no longer rewrites at every drain.
 */
const CREDIT_COLUMN_NAMES = [
  'id',
  'organization_id',
  'subscriber_id',
  'feature_id',
  'name',
  'amount',
  'spent_seq',
  'priority',
  'effective_at',
  'expires_at',
  'source',
  'source_period_start',
  'voided_at',
  'expired_event_at',
  'created_at',
] as const;

type CreditColumnName = (typeof CREDIT_COLUMN_NAMES)[number];

/** `spent` of the credit aliased `c`, as CREDIT_COLUMNS describes it. */
export const creditSpentNow = sql<number>`credit_spent_now(c)`.as('spent');

/** The same columns of `credits as c`, and its `spent`: a whole credit. */
export const CREDIT_COLUMNS = [
  ...CREDIT_COLUMN_NAMES.map((name): `c.${CreditColumnName}` => `c.${name}`),
  creditSpentNow,
];

/**
 * What an UPDATE of `credits` (aliased `alias`) sets to keep the credit's figure in its own row from now on: its
 * figure now, at the sequence of the latest row naming it (never a new one, so a later drain's figure still passes
 * it). Voiding and expiry set it: a credit that can no longer be spent may drop out of its subscriber's credit-spent
 * hash (a refill puts back the live ones), and then out of the rows its later drains write.
 */
export const keptCreditFigures = (alias: 'c' | 'credits') => ({
  spent: sql<number>`credit_spent_now(${sql.ref(alias)})`,
  spent_seq: sql<number>`GREATEST(${sql.ref(`${alias}.spent_seq`)}, COALESCE((
    SELECT max(m.credit_spent_seq) FROM metered_usage m
    WHERE m.organization_id = ${sql.ref(`${alias}.organization_id`)}
      AND m.subscriber_id = ${sql.ref(`${alias}.subscriber_id`)} AND m.credit_spent ? ${sql.ref(`${alias}.id`)}
  ), 0))`,
});
