import { randomBytes } from 'node:crypto';
import { periodOf } from '@ent/common/metering/period';
import type { MeteredOperation } from './metered-operations.ts';

/**
 * How long Redis remembers a gate batch (what it counted) and a settled mark. A failed call is settled
 * exactly when the gateway reaches Redis again within this time after the script ran; past it, the settle
 * takes the batch for one that never ran. Kept short because every batch leaves such a key behind.
 */
export const GATE_BATCH_MEMORY_MS = 60_000;

/**
 * Ids for calls Redis remembers (gate batches, usage calls): unique among the calls it remembers, so a random prefix
 * per maker and a sequence.
 */
export function createCallIds(): () => string {
  const prefix = randomBytes(6).toString('base64url');
  let sequence = 0;
  return () => `${prefix}.${(sequence++).toString(36)}`;
}

/** One adjustment owed to Redis: the 2xx answers of a failed gate call (or of several never sent), or a refund. */
export interface Settlement {
  /** The batch id the gate script remembered (or a fresh id the settle script marks settled). */
  id: string;
  organizationId: string;
  /** An instant of the settlement's UTC month (the evals' own clock). */
  nowMs: number;
  /** Evals answered 2xx, or -1 for a refund (0 for a usage call: it counts no evals). */
  answered: number;
  /**
   * The call's metered operations, in its order (a gate batch's, or a usage call's): its memory names only which
   * applied (or what each changed), the settle needs the rest to give them back.
   */
  operations?: readonly MeteredOperation[] | undefined;
}

interface Owed extends Settlement {
  /** Evals of the call not yet answered: it is settled only once all have reported. */
  waiting: number;
  /** No more evals join (calls never sent join one open settlement per organization and month). */
  sealed: boolean;
  /** False for calls never sent: with no 2xx answer there is then nothing to settle. */
  mayHaveRun: boolean;
}

export interface Settlements {
  /**
   * A gate call of `size` evals that failed; `sent` = it may have reached Redis, with its metered `operations` (if
   * any) for the consumes it may have applied. Returns each eval's report.
   */
  failedCall(
    id: string,
    organizationId: string,
    nowMs: number,
    size: number,
    sent: boolean,
    operations?: readonly MeteredOperation[],
  ): (answered2xx: boolean) => void;
  /** A refund that Redis did not take now, or a usage call that failed (it may have run). */
  owe(settlement: Settlement): void;
  /** Applies each ready settlement once, oldest first; stops at the first failure (retried next time). */
  settle(): Promise<void>;
  pending(): number;
}

/**
 * What failed gate calls and refunds owe Redis, kept in the gateway until Redis takes them. `apply` runs
 * eval-settle-4.lua, which is idempotent per id, so a settle whose reply is lost is simply sent again.
 */
export function createSettlements(apply: (settlement: Settlement) => Promise<void>): Settlements {
  const owed = new Set<Owed>();
  const openUnsent = new Map<string, Owed>();
  let settling: Promise<void> | null = null;

  const join = (entry: Owed, size: number) => {
    entry.waiting += size;
    let left = size;
    return (answered2xx: boolean) => {
      // A second report for the same eval would break the count: ignored.
      if (left === 0) return;
      left -= 1;
      entry.waiting -= 1;
      if (answered2xx) entry.answered += 1;
    };
  };

  return {
    failedCall(id, organizationId, nowMs, size, sent, operations) {
      if (sent) {
        const entry: Owed = {
          id,
          organizationId,
          nowMs,
          answered: 0,
          operations,
          waiting: 0,
          sealed: true,
          mayHaveRun: true,
        };
        owed.add(entry);
        return join(entry, size);
      }
      // Never reached Redis: nothing to reconcile with, so such calls share one settlement per month.
      const lane = `${organizationId}\u0000${periodOf(nowMs)}`;
      let entry = openUnsent.get(lane);
      if (!entry) {
        entry = { id, organizationId, nowMs, answered: 0, waiting: 0, sealed: false, mayHaveRun: false };
        openUnsent.set(lane, entry);
        owed.add(entry);
      }
      return join(entry, size);
    },

    owe(settlement) {
      owed.add({ ...settlement, waiting: 0, sealed: true, mayHaveRun: true });
    },

    settle() {
      settling ??= (async () => {
        for (const entry of openUnsent.values()) entry.sealed = true;
        openUnsent.clear();
        for (const entry of [...owed]) {
          if (!entry.sealed || entry.waiting > 0) continue;
          const { id, organizationId, nowMs, answered, operations } = entry;
          if (entry.mayHaveRun || answered !== 0)
            await apply({ id, organizationId, nowMs, answered, operations });
          owed.delete(entry);
        }
      })().finally(() => {
        settling = null;
      });
      return settling;
    },

    pending: () => owed.size,
  };
}
