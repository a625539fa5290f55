import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import type { DomainEvent } from '../../shared/write/outcome.ts';
import type { DrainedCreditHash } from '../../metered-usage/balance-scripts.ts';
import { isRolloverField, parseRolloverField, recordRollovers, type Rollover } from './rollovers.ts';

/** The spent figures and rollover records of drained credit-spent hashes. */
function figuresOf(hashes: readonly DrainedCreditHash[]): {
  figures: { creditId: string; spent: number }[];
  rollovers: Rollover[];
} {
  const figures: { creditId: string; spent: number }[] = [];
  const rollovers: Rollover[] = [];
  for (const { subscriberId, feature, fields } of hashes) {
    for (const [field, value] of Object.entries(fields)) {
      if (isRolloverField(field)) {
        const rollover = parseRolloverField(subscriberId, feature, field, value);
        if (rollover) rollovers.push(rollover);
        continue;
      }
      const spent = Number(value);
      if (Number.isSafeInteger(spent) && spent >= 0) figures.push({ creditId: field, spent });
    }
  }
  return { figures, rollovers };
}

/**
 * Persists credit-spent hashes the metered drain read with its balances (one script call, so with the balances of
 * the same instant): rollover credits first (recorded once each), then every spent figure into `credits.spent` (one
 * UPDATE for the batch). The caller holds the organization's drain lock from before the drain to the commit, so
 * drains land in Postgres in the order they read Redis and an older figure never overwrites a newer one. Answers
 * the rows changed and the `credit.created` events of the rollovers this call recorded.
 */
export async function persistCreditHashes(
  trx: Transaction<Database>,
  organizationId: string,
  hashes: readonly DrainedCreditHash[],
  nowMs: number,
): Promise<{ persisted: number; events: DomainEvent[] }> {
  if (hashes.length === 0) return { persisted: 0, events: [] };
  const { figures, rollovers } = figuresOf(hashes);
  const events = await recordRollovers(trx, organizationId, rollovers, nowMs);
  let updated = 0;
  if (figures.length > 0) {
    const sorted = [...figures].sort((a, b) =>
      a.creditId < b.creditId ? -1 : a.creditId > b.creditId ? 1 : 0,
    );
    // No RETURNING: the count is all the caller reports.
    const result = await sql`
      UPDATE credits AS c SET spent = f.spent
      FROM unnest(${sorted.map((figure) => figure.creditId)}::text[], ${sorted.map((figure) => figure.spent)}::bigint[])
        AS f(id, spent)
      WHERE c.organization_id = ${organizationId} AND c.id = f.id AND c.spent <> f.spent
    `.execute(trx);
    updated = Number(result.numAffectedRows ?? 0);
  }
  return { persisted: updated + events.length, events };
}
