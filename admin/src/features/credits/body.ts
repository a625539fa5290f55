import type { CreditBody, CreditStatus } from '@ent/contract/credits';
import type { CreditWithFeature } from './store.ts';

/**
 * A credit's status at `nowMs` given what it has spent: voided and expired first (what was left is gone), then
 * scheduled (not effective yet), then spent (nothing left), else active.
 */
export function creditStatus(credit: CreditWithFeature, spent: number, nowMs: number): CreditStatus {
  if (credit.voided_at !== null) return 'voided';
  if (credit.expires_at !== null && credit.expires_at.getTime() <= nowMs) return 'expired';
  if (credit.effective_at.getTime() > nowMs) return 'scheduled';
  if (spent >= credit.amount) return 'spent';
  return 'active';
}

/** The response shape; `spent` is the current figure (Redis's when it has one, else Postgres's). */
export function toCreditBody(credit: CreditWithFeature, spent: number, nowMs: number): CreditBody {
  const status = creditStatus(credit, spent, nowMs);
  const live = status === 'scheduled' || status === 'active';
  const clamped = Math.min(Math.max(0, spent), credit.amount);
  return {
    credit_id: credit.id,
    subscriber_id: credit.subscriber_id,
    feature: credit.feature_key,
    name: credit.name,
    amount: credit.amount,
    spent: clamped,
    remaining: live ? credit.amount - clamped : 0,
    priority: credit.priority,
    effective_at: credit.effective_at.toISOString(),
    expires_at: credit.expires_at ? credit.expires_at.toISOString() : null,
    status,
    source: credit.source,
    voided_at: credit.voided_at ? credit.voided_at.toISOString() : null,
    created_at: credit.created_at.toISOString(),
  };
}
