import type { JobState } from 'bullmq';
import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { deliveryJobId } from './dispatch.ts';
import type { JobDefinition, JobDependencies } from '../../jobs/job.ts';
import { MAX_ERROR_LENGTH, STANDARD_SCHEDULE_MS } from './delivery.job.ts';

declare module '../../jobs/queues.ts' {
  interface QueuePayloads {
    /** Repeatable: re-queue deliveries still `pending` well after their attempt was due whose job is gone or dead. */
    'webhook-sweep': { staleAfterMs: number };
  }
}

const MINUTE = 60_000;

/** A delivery still `pending` this long after its attempt was due has lost its job, or its job died. */
const SWEEP_STALE_AFTER_MS = 2 * MINUTE;

export interface SweepOptions {
  staleAfterMs: number;
  batchSize: number;
  /** Bounds one run; the next run goes on where the rows still qualify. */
  maxBatches: number;
  /** A delivery gives up (`failed`) after this many attempts, the same bound as the delivery schedule. */
  maxAttempts: number;
}

const defaultSweepOptions: SweepOptions = {
  staleAfterMs: SWEEP_STALE_AFTER_MS,
  batchSize: 100,
  maxBatches: 10,
  maxAttempts: STANDARD_SCHEDULE_MS.length,
};

export interface SweepResult {
  /** Stale rows looked at. */
  checked: number;
  /** Rows whose job was missing, completed or failed and which got a fresh job. */
  requeued: number;
  /** Rows whose dead job was their last attempt: now `failed`. */
  gaveUp: number;
}

/** The job will still run: the delivery is only late (a busy worker, a long Retry-After). */
const LIVE_STATES = new Set<JobState | 'unknown'>([
  'waiting',
  'waiting-children',
  'prioritized',
  'delayed',
  'active',
]);

interface StaleRow {
  id: string;
  attempts: number;
  next_attempt_at: Date | null;
}

function staleBatch(
  db: Kysely<Database>,
  cutoff: Date,
  after: StaleRow | undefined,
  limit: number,
): Promise<StaleRow[]> {
  let query = db
    .selectFrom('webhook_deliveries')
    .select(['id', 'attempts', 'next_attempt_at'])
    .where('status', '=', 'pending')
    .where('next_attempt_at', '<', cutoff);
  if (after?.next_attempt_at) {
    const at = after.next_attempt_at;
    query = query.where((eb) => eb(eb.refTuple('next_attempt_at', 'id'), '>', eb.tuple(at, after.id)));
  }
  return query.orderBy('next_attempt_at').orderBy('id').limit(limit).execute();
}

/**
 * Records a dead job (crashed, stalled too often, or out of BullMQ's attempts) as a failed attempt, only if
 * nobody moved the row on meanwhile. Returns whether this call did.
 */
async function countDeadAttempt(
  db: Kysely<Database>,
  row: StaleRow,
  reason: string,
  now: Date,
  lastAttempt: boolean,
): Promise<boolean> {
  const result = await db
    .updateTable('webhook_deliveries')
    .set({
      attempts: row.attempts + 1,
      last_error: reason.slice(0, MAX_ERROR_LENGTH),
      next_attempt_at: lastAttempt ? null : now,
      ...(lastAttempt && { status: 'failed' as const }),
      updated_at: now,
    })
    .where('id', '=', row.id)
    .where('status', '=', 'pending')
    .where('attempts', '=', row.attempts)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/**
 * Finds deliveries by their Postgres state (`pending`, due more than `staleAfterMs` ago) and looks at the
 * job of their next attempt: a live job is left alone; a missing or completed one is replaced by a fresh
 * job of the same id; a failed one counts as a failed attempt and the next attempt is queued at once (or the
 * delivery is `failed` when that was its last). Safe with several workers sweeping at once: the attempt is
 * counted by compare-and-set on `attempts`, a job id exists at most once in BullMQ, and the delivery
 * processor ignores a job whose attempt is no longer the row's next.
 */
export async function sweepStaleDeliveries(
  deps: Pick<JobDependencies, 'db' | 'clock' | 'queues'>,
  overrides: Partial<SweepOptions> = {},
): Promise<SweepResult> {
  const options = { ...defaultSweepOptions, ...overrides };
  const queue = deps.queues['webhook-delivery'];
  const cutoff = new Date(deps.clock.now() - options.staleAfterMs);
  const result: SweepResult = { checked: 0, requeued: 0, gaveUp: 0 };
  let after: StaleRow | undefined;
  for (let batch = 0; batch < options.maxBatches; batch++) {
    const rows = await staleBatch(deps.db, cutoff, after, options.batchSize);
    for (const row of rows) {
      result.checked += 1;
      const jobId = deliveryJobId(row.id, row.attempts + 1);
      const state = await queue.getJobState(jobId);
      if (LIVE_STATES.has(state)) continue;
      if (state === 'failed') {
        const job = await queue.getJob(jobId);
        const lastAttempt = row.attempts + 1 >= options.maxAttempts;
        const reason = `the worker's attempt failed: ${job?.failedReason || 'no reason recorded'}`;
        if (!(await countDeadAttempt(deps.db, row, reason, new Date(deps.clock.now()), lastAttempt)))
          continue;
        if (lastAttempt) {
          result.gaveUp += 1;
          continue;
        }
        await queue.add(
          'webhook-delivery',
          { deliveryId: row.id },
          { jobId: deliveryJobId(row.id, row.attempts + 2) },
        );
      } else {
        // A completed job of the same id would make the add a silent no-op. Removing fails only for a job
        // another sweeper just re-added and a worker holds: that one is live, and the add below is a no-op.
        if (state === 'completed') await queue.remove(jobId).catch(() => 0);
        await queue.add('webhook-delivery', { deliveryId: row.id }, { jobId });
      }
      result.requeued += 1;
    }
    if (rows.length < options.batchSize) break;
    after = rows[rows.length - 1];
  }
  return result;
}

export const webhookSweepJob: JobDefinition<'webhook-sweep'> = {
  queue: 'webhook-sweep',
  processor: (deps) => async (job) => sweepStaleDeliveries(deps, { staleAfterMs: job.data.staleAfterMs }),
  concurrency: 1,
  repeatEveryMs: MINUTE,
  repeatPayload: { staleAfterMs: SWEEP_STALE_AFTER_MS },
};
