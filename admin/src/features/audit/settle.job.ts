import type { Kysely } from 'kysely';
import type { Clock } from '@ent/common/clock';
import type { Database } from '@ent/common/db/database';
import { insertSettleMark, latestSettleMark, settlePendingEntries } from './store.ts';
import type { JobDefinition, JobDependencies } from '../../jobs/job.ts';

declare module '../../jobs/queues.ts' {
  interface QueuePayloads {
    /** Repeatable: settle audit entries left `pending` past the bound to `no_response`. */
    'audit-settle': { olderThanMs: number };
  }
}

/** An entry still `pending` this long after its request arrived will never get an answer: settle it. */
const AUDIT_SETTLE_AFTER_MS = 5 * 60_000;
const BATCH_SIZE = 1000;
const MAX_BATCHES = 100;

/**
 * Appends `no_response` to every entry pending for longer than `olderThanMs`, then records the cutoff as a mark:
 * every entry before the latest mark has an outcome, so each run (and the `outcome=pending` filter) only looks
 * at entries after it. An insert never lands before the cutoff: a pending insert that cannot finish within
 * seconds fails (503). Returns how many entries were settled.
 */
export async function settleAudit(
  deps: { db: Kysely<Database>; clock: Clock },
  olderThanMs: number = AUDIT_SETTLE_AFTER_MS,
): Promise<number> {
  const now = deps.clock.now();
  const cutoff = new Date(now - olderThanMs);
  // Marks after this run's clock are ignored: one dated in the future must not make every run skip.
  const since = await latestSettleMark(deps.db, new Date(now));
  if (since && since >= cutoff) return 0;
  let settled = 0;
  for (let batch = 0; batch < MAX_BATCHES; batch++) {
    const count = await settlePendingEntries(deps.db, { cutoff, since, batchSize: BATCH_SIZE });
    settled += count;
    if (count === 0) {
      await insertSettleMark(deps.db, cutoff);
      break;
    }
  }
  return settled;
}

export const auditSettleJob: JobDefinition<'audit-settle'> = {
  queue: 'audit-settle',
  processor: (deps: JobDependencies) => async (job) => ({
    settled: await settleAudit(deps, job.data.olderThanMs),
  }),
  concurrency: 1,
  repeatEveryMs: 60_000,
  repeatPayload: { olderThanMs: AUDIT_SETTLE_AFTER_MS },
};
