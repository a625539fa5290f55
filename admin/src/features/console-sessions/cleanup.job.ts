import { sql, type Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import type { JobDefinition, JobDependencies } from '../../jobs/job.ts';

declare module '../../jobs/queues.ts' {
  interface QueuePayloads {
    /** Repeatable: delete console sessions that ended (expired or revoked) more than 30 days ago. */
    'console-session-cleanup': Record<string, never>;
  }
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * How long an ended session (expired or revoked) is kept: its row maps the prefix the audit log shows to a member
 * and a sign-in time, which an investigation of recent console writes needs; after that it is only weight.
 */
export const ENDED_SESSION_RETENTION_MS = 30 * DAY_MS;

export interface SessionCleanupOptions {
  retentionMs: number;
  batchSize: number;
  /** Bounds one run; the next run goes on with what is left. */
  maxBatches: number;
}

const defaultSessionCleanupOptions: SessionCleanupOptions = {
  retentionMs: ENDED_SESSION_RETENTION_MS,
  batchSize: 1000,
  maxBatches: 20,
};

/** Deletes sessions that ended more than `retentionMs` ago, in small batches; returns how many went. */
export async function deleteEndedSessions(
  deps: Pick<JobDependencies, 'db' | 'clock'>,
  overrides: Partial<SessionCleanupOptions> = {},
): Promise<{ deleted: number }> {
  const options = { ...defaultSessionCleanupOptions, ...overrides };
  const cutoff = new Date(deps.clock.now() - options.retentionMs);
  let deleted = 0;
  for (let batch = 0; batch < options.maxBatches; batch++) {
    const count = await deleteBatch(deps.db, cutoff, options.batchSize);
    deleted += count;
    if (count < options.batchSize) break;
  }
  return { deleted };
}

async function deleteBatch(db: Kysely<Database>, cutoff: Date, limit: number): Promise<number> {
  const result = await db
    .deleteFrom('console_sessions')
    .where('id', 'in', (eb) =>
      eb
        .selectFrom('console_sessions')
        .select('id')
        .where((w) => w.or([w('expires_at', '<', cutoff), w('revoked_at', '<', cutoff)]))
        .limit(limit)
        // Two workers running at once skip each other's rows instead of waiting on them.
        .modifyEnd(sql`FOR UPDATE SKIP LOCKED`),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

export const sessionCleanupJob: JobDefinition<'console-session-cleanup'> = {
  queue: 'console-session-cleanup',
  processor: (deps) => async () => deleteEndedSessions(deps),
  concurrency: 1,
  repeatEveryMs: 60 * 60 * 1000,
  repeatPayload: {},
};
