import type { Kysely } from 'kysely';
import type { Clock } from '@ent/common/clock';
import type { Database } from '@ent/common/db/database';
import { settlePendingEntries } from '../features/audit/store.ts';
import type { JobDefinition, JobDependencies } from './processors.ts';

/** An entry still `pending` this long after its request arrived will never get an answer: settle it. */
export const AUDIT_SETTLE_AFTER_MS = 5 * 60_000;
/** How far back each run looks; entries pending longer than this (workers down that long) stay pending. */
export const AUDIT_SETTLE_LOOKBACK_MS = 24 * 60 * 60_000;
const BATCH_SIZE = 1000;
const MAX_BATCHES = 100;

/** Appends `no_response` to every entry pending for longer than `olderThanMs`; returns how many were settled. */
export async function settleAudit(
  deps: { db: Kysely<Database>; clock: Clock },
  olderThanMs: number = AUDIT_SETTLE_AFTER_MS,
): Promise<number> {
  const now = deps.clock.now();
  const cutoff = new Date(now - olderThanMs);
  const since = new Date(now - olderThanMs - AUDIT_SETTLE_LOOKBACK_MS);
  let settled = 0;
  for (let batch = 0; batch < MAX_BATCHES; batch++) {
    const count = await settlePendingEntries(deps.db, { cutoff, since, batchSize: BATCH_SIZE });
    settled += count;
    if (count === 0) break;
  }
  return settled;
}

export const auditSettleJob: JobDefinition<'audit-settle'> = {
  queue: 'audit-settle',
  processor: (deps: JobDependencies) => async (job) => ({ settled: await settleAudit(deps, job.data.olderThanMs) }),
  concurrency: 1,
  repeatEveryMs: 60_000,
  repeatPayload: { olderThanMs: AUDIT_SETTLE_AFTER_MS },
};
