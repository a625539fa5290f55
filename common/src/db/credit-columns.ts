import { sql } from 'kysely';

/**
 * A credit's columns as every reader selects them from `credits as c`: `spent` is what the credit has spent as
 * Postgres knows it, the latest of its own figure and those its balances' rows carry (`credit_spent_now`, migration
 * 2026-11-27T2000), never the column alone, which the worker no longer rewrites at every drain.
 */
export const CREDIT_COLUMN_NAMES = [
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

/** The same columns of `credits as c`. */
export const CREDIT_COLUMNS = CREDIT_COLUMN_NAMES.map((name): `c.${CreditColumnName}` => `c.${name}`);

/** `spent` of the credit aliased `c`, as CREDIT_COLUMNS describes it. */
export const creditSpentNow = sql<number>`credit_spent_now(c)`.as('spent');

/** The same, of the row an UPDATE of `credits` (not aliased) returns. */
export const updatedCreditSpentNow = sql<number>`credit_spent_now(credits)`.as('spent');
