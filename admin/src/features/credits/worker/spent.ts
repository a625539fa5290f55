import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import type { DomainEvent } from '../../shared/write/outcome.ts';
import type { DrainedCreditHash } from '../../metered-usage/balance-scripts.ts';
import { isRolloverField, parseRolloverField, recordRollovers, type Rollover } from './rollovers.ts';

/** A spent figure as the credit-spent hash holds it, or null for a field that is not one (a rollover record). */
function spentFigure(field: string, value: string): number | null {
  if (isRolloverField(field)) return null;
  const spent = Number(value);
  return Number.isSafeInteger(spent) && spent >= 0 ? spent : null;
}

/** The rollover records of drained credit-spent hashes, and the spent figures of those to write to the credits. */
function figuresOf(hashes: readonly DrainedCreditHash[]): {
  figures: { creditId: string; spent: number }[];
  rollovers: Rollover[];
} {
  const figures: { creditId: string; spent: number }[] = [];
  const rollovers: Rollover[] = [];
  for (const { subscriberId, feature, fields, standalone } of hashes) {
    for (let i = 0; i < fields.length; i += 2) {
      const field = fields[i]!;
      const value = fields[i + 1]!;
      if (isRolloverField(field)) {
        const rollover = parseRolloverField(subscriberId, feature, field, value);
        if (rollover) rollovers.push(rollover);
        continue;
      }
      const spent = standalone ? spentFigure(field, value) : null;
      if (spent !== null) figures.push({ creditId: field, spent });
    }
  }
  return { figures, rollovers };
}

/**
 * A hash's spent figures as the JSON object a balance's row keeps (`metered_usage.credit_spent`), or null when it
 * holds none. Built as text: the figures are integers and the ids hold no character JSON escapes (CREDIT_ID_PATTERN;
 * a rollover credit's id is made by the gateway from digits and hex).
 */
export function spentFiguresJson(fields: readonly string[]): string | null {
  let json = '';
  for (let i = 0; i < fields.length; i += 2) {
    const field = fields[i]!;
    const spent = spentFigure(field, fields[i + 1]!);
    if (spent === null) continue;
    json += `${json === '' ? '{' : ','}${JSON.stringify(field)}:${spent}`;
  }
  return json === '' ? null : `${json}}`;
}

/**
 * Persists what the metered drain read of credit-spent hashes (one script call, so with the balances of the same
 * instant): rollover credits first (recorded once each), then the spent figures of the hashes no balance row carries
 * (`standalone`) into `credits.spent`, with the drain's `figureSeq` as `spent_seq` (one UPDATE for the batch). The
 * figures of a hash read with a balance go into that balance's row (persist-store.ts), the cheaper write: one row per
 * drained balance, as without credits. The caller holds the organization's drain lock from before the drain to the
 * commit and takes `figureSeq` with that lock (persister.ts), so a later drain's number is larger:
 * `credit_spent_now` answers the figure of the latest. Answers the rows changed and the `credit.created` events of
 * the rollovers this call recorded.
 */
export async function persistCreditHashes(
  trx: Transaction<Database>,
  organizationId: string,
  hashes: readonly DrainedCreditHash[],
  nowMs: number,
  figureSeq: number,
): Promise<{ persisted: number; events: DomainEvent[] }> {
  if (hashes.length === 0) return { persisted: 0, events: [] };
  const { figures, rollovers } = figuresOf(hashes);
  const events = await recordRollovers(trx, organizationId, rollovers, nowMs);
  let updated = 0;
  if (figures.length > 0) {
    const ids = figures.map((figure) => figure.creditId);
    const spent = figures.map((figure) => figure.spent);
    // Every figure, even one equal to `spent`: its sequence must pass the rows' that hold an older one. The credits
    // are locked first in (organization_id, id) order, as the fold locks them (fold.ts), with the lock the UPDATE
    // takes anyway: an UPDATE ... FROM alone locks in the order its join's plan yields rows, whatever order the ids
    // come in, and two statements locking in different orders can deadlock. No RETURNING: the count is all the
    // caller reports.
    const result = await sql`
      WITH locked AS MATERIALIZED (
        SELECT c.id, f.spent
        FROM credits c JOIN unnest(${ids}::text[], ${spent}::bigint[]) AS f(id, spent) ON c.id = f.id
        WHERE c.organization_id = ${organizationId}
        ORDER BY c.organization_id, c.id
        FOR NO KEY UPDATE OF c
      )
      UPDATE credits AS c SET spent = k.spent, spent_seq = ${figureSeq}::bigint
      FROM locked k
      WHERE c.organization_id = ${organizationId} AND c.id = k.id
    `.execute(trx);
    updated = Number(result.numAffectedRows ?? 0);
  }
  return { persisted: updated + events.length, events };
}
