import { rolloverCreditId } from '@ent/common/metering/credits';
import { type AppError, validationError } from '@ent/common/errors/app-error';
import { parseDateTime } from '@ent/common/http/date-time';
import type { CreditLine } from '@ent/contract/import-lines';

/** A credit line's record as the credits table holds it; `null` on an optional field the line left out. */
export interface CreditTerms {
  id: string;
  subscriberId: string;
  feature: string;
  amount: number;
  spent: number;
  /** Absent fields: the default for a new credit, left as they are on an existing one. */
  given: { effectiveAt: boolean; expiresAt: boolean; priority: boolean; name: boolean; createdAt: boolean };
  priority: number | null;
  name: string | null;
  effectiveAt: Date;
  expiresAt: Date | null;
  createdAt: Date;
  source: 'manual' | 'rollover';
  sourcePeriodStart: Date | null;
}

function instantOf(value: string, field: string): Date | AppError {
  const ms = parseDateTime(value);
  if (Number.isNaN(ms))
    return validationError(`${field} is not a valid ISO 8601 timestamp.`, { field, value });
  return new Date(ms);
}

/**
 * What a credit line means, or why it is refused without asking the database: spent beyond the amount, an expiry
 * not after the effective instant (as the POST refuses it), a rollover without the period it came from, before it,
 * or under another id than the gateway gives that rollover (docs/decisions.md, "Credits and archived plans in import
 * and export").
 */
export function creditTermsOf(line: CreditLine, nowMs: number): CreditTerms | AppError {
  const effectiveAt =
    line.effective_at === undefined ? new Date(nowMs) : instantOf(line.effective_at, 'effective_at');
  if (!(effectiveAt instanceof Date)) return effectiveAt;
  const expiresAt = line.expires_at == null ? null : instantOf(line.expires_at, 'expires_at');
  if (expiresAt !== null && !(expiresAt instanceof Date)) return expiresAt;
  const createdAt =
    line.created_at === undefined ? new Date(nowMs) : instantOf(line.created_at, 'created_at');
  if (!(createdAt instanceof Date)) return createdAt;
  const spent = line.spent ?? 0;
  if (spent > line.amount)
    return validationError(`spent (${spent}) cannot exceed amount (${line.amount}).`, {
      field: 'spent',
      value: spent,
      amount: line.amount,
    });
  if (expiresAt && expiresAt.getTime() <= effectiveAt.getTime())
    return validationError('expires_at must be later than effective_at.', {
      field: 'expires_at',
      value: line.expires_at,
      effective_at: effectiveAt.toISOString(),
    });
  const source = line.source ?? 'manual';
  let sourcePeriodStart: Date | null = null;
  if (source === 'manual') {
    if (line.source_period_start !== undefined)
      return validationError('source_period_start belongs to a rollover credit (source "rollover").', {
        field: 'source_period_start',
        value: line.source_period_start,
      });
  } else {
    if (line.source_period_start === undefined)
      return validationError('A rollover credit names source_period_start, the period it rolled over from.', {
        field: 'source_period_start',
      });
    const start = instantOf(line.source_period_start, 'source_period_start');
    if (!(start instanceof Date)) return start;
    if (start.getTime() >= effectiveAt.getTime())
      return validationError('source_period_start must be earlier than effective_at.', {
        field: 'source_period_start',
        value: line.source_period_start,
        effective_at: effectiveAt.toISOString(),
      });
    // The gateway recognizes a stored rollover by this id: under another one it would be spent a second time.
    const expected = rolloverCreditId(line.subscriber_id, line.feature, effectiveAt.getTime());
    if (line.credit_id !== expected)
      return validationError(`A rollover credit's id is the one the gateway gives it: "${expected}".`, {
        field: 'credit_id',
        value: line.credit_id,
        expected,
      });
    sourcePeriodStart = start;
  }
  return {
    id: line.credit_id,
    subscriberId: line.subscriber_id,
    feature: line.feature,
    amount: line.amount,
    spent,
    given: {
      effectiveAt: line.effective_at !== undefined,
      expiresAt: line.expires_at !== undefined,
      priority: line.priority !== undefined,
      name: line.name !== undefined,
      createdAt: line.created_at !== undefined,
    },
    priority: line.priority ?? null,
    name: line.name ?? null,
    effectiveAt,
    expiresAt,
    createdAt,
    source,
    sourcePeriodStart,
  };
}
