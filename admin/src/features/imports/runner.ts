import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { transact } from '@ent/common/outbox/record';
import type { ImportRecordLine } from '@ent/contract/import-lines';
import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';
import type { CatalogLimits } from '../shared/catalog-limits.ts';
import type { SnapshotPublisher } from '../snapshots/publisher.ts';
import { applyBatch, type BatchOutcome } from './apply-batch.ts';
import { archiveImportedPlans } from './archive-plans.ts';
import { seedCreditSpent } from './credit-spent.ts';
import {
  findAbandonedImports,
  finishImport,
  lastStagedLine,
  lockLeasedImport,
  nextPendingLines,
  plansArchivedBy,
  recordBatch,
  takeExpiredLease,
  type LineResult,
} from './store.ts';

export interface ImportRunnerOptions {
  /** Lines applied per transaction. */
  batchSize: number;
  /** How long a silent runner keeps its import; every batch renews it. */
  leaseMs: number;
  /** Statistics are refreshed after an import of at least this many lines. */
  analyzeAtLines: number;
}

const defaultImportRunnerOptions: ImportRunnerOptions = {
  batchSize: 5000,
  leaseMs: 30_000,
  analyzeAtLines: 10_000,
};

export interface ImportRunnerDeps {
  db: Kysely<Database>;
  publisher: SnapshotPublisher;
  /** Where gateways read credits' spent figures: an imported credit's is written there before its batch commits. */
  redis: RedisClient;
  redisKeys: RedisKeys;
  catalogLimits: CatalogLimits;
  log: { warn(message: string): void; error(message: string): void };
}

/** A batch's results as stored: a refusal keeps its error body, naming the import's request. */
function lineResults(outcome: BatchOutcome, requestId: string): LineResult[] {
  return [...outcome.results].map(([line, applied]) => ({
    line,
    result: applied.result,
    error: applied.result === 'failed' ? applied.error.toBody(requestId).error : null,
  }));
}

class DryRunRollback extends Error {}

/**
 * `work` in a savepoint of `trx`: rolled back to it when `work` fails, so `trx` stays usable. When that rollback
 * fails too (the session is gone), the first error is the one that says why.
 */
async function inSavepoint<T>(trx: Transaction<Database>, work: () => Promise<T>): Promise<T> {
  await sql`SAVEPOINT import_batch`.execute(trx);
  try {
    const result = await work();
    await sql`RELEASE SAVEPOINT import_batch`.execute(trx);
    return result;
  } catch (error) {
    await sql`ROLLBACK TO SAVEPOINT import_batch`.execute(trx).catch(() => {});
    throw error;
  }
}

/**
 * A dry run's two transactions wait on each other: the dry one sits idle while the batch's lease is taken and its
 * results are recorded, the recording one while the whole batch is applied (a statement stalled up to the statement
 * timeout included). The app's pools end a session idle in a transaction after as long as the statement timeout: the
 * waiting session would be ended as the stalled statement was cancelled, and the batch could not be tried again. A
 * batch applies in seconds; a dead process's sessions still end at once (its connections close).
 */
const DRY_RUN_IDLE_LIMIT = sql`SET LOCAL idle_in_transaction_session_timeout = '120s'`;

/** Postgres cancelled a statement at the statement timeout (10 s on the app's pools): its transaction is rolled back. */
const isStatementTimeout = (error: unknown): boolean =>
  (error as { code?: unknown } | null)?.code === '57014';

/** Tries of one batch that reaches the statement timeout, each with half the lines of the one before. */
const BATCH_TIMEOUT_TRIES = 4;

/**
 * Applies imports in this process (DESIGN.md §5): batch after batch, each in one transaction with the lines' results
 * and the import's cursor, so a process killed anywhere leaves whole batches only; after each commit, what the batch
 * changed is published (while the next batch is applied, see applyAll), all of it before the import ends, so
 * `succeeded` means every gateway can serve the import. The
 * lease (renewed by each batch) says which process applies an import; one whose holder died is resumed from its
 * cursor by `resumeAbandoned` (admin at start, then periodically, and the worker).
 */
export function createImportRunner(deps: ImportRunnerDeps, overrides: Partial<ImportRunnerOptions> = {}) {
  const options = { ...defaultImportRunnerOptions, ...overrides };
  const { db, publisher, log } = deps;
  /** This process's name on the leases it holds. */
  const owner = `${process.pid}:${randomUUID()}`;
  const running = new Map<string, Promise<void>>();
  let stopping = false;

  async function publish(organizationId: string, outcome: BatchOutcome): Promise<void> {
    if (outcome.catalogChanged) await publisher.publishCatalog(organizationId);
    if (outcome.subscribersChanged.size > 0)
      await publisher.publishSubscribers(organizationId, [...outcome.subscribersChanged], {
        entries: outcome.subscriberEntries,
      });
  }

  type Step =
    | { kind: 'lost' }
    | { kind: 'done'; organizationId: string; lines: number; dryRun: boolean }
    | { kind: 'batch' };
  type StepResult = { step: Step; published?: { organizationId: string; outcome: BatchOutcome } };

  /**
   * One batch of at most `batchSize` lines of `importId` applied in `trx`, its results recorded through `record` (the
   * same transaction, or not).
   */
  async function step(
    trx: Transaction<Database>,
    importId: string,
    record: Transaction<Database>,
    batchSize: number,
  ): Promise<StepResult> {
    const current = await lockLeasedImport(record, importId, owner);
    if (!current) return { step: { kind: 'lost' } };
    const pending = await nextPendingLines(record, importId, current.applied_through, batchSize);
    if (pending.length === 0) {
      const last = await lastStagedLine(record, importId);
      if (current.applied_through >= last)
        return {
          step: {
            kind: 'done',
            organizationId: current.organization_id,
            lines: current.lines,
            dryRun: current.dry_run,
          },
        };
      // A span of lines refused while staging (or blank): nothing to apply, the cursor moves past it.
      const through = Math.min(last, current.applied_through + batchSize);
      await recordBatch(record, importId, [], through, options.leaseMs);
      return { step: { kind: 'batch' } };
    }
    const outcome = await applyBatch(
      trx,
      {
        organizationId: current.organization_id,
        catalogLimits: deps.catalogLimits,
        nowMs: Date.now(),
        // A runner that dies before publishing leaves them to the relay once its lease is over too.
        relayAfterMs: options.leaseMs,
      },
      pending.map((p) => ({ line: p.line, record: p.record as unknown as ImportRecordLine })),
    );
    // Before the commit: once the credit is published, a gateway without its figure would spend it from 0. A batch
    // that then fails to commit leaves fields of credits that do not exist, which nothing reads.
    if (!current.dry_run)
      await seedCreditSpent(deps.redis, deps.redisKeys, current.organization_id, outcome.creditSeeds);
    await recordBatch(
      record,
      importId,
      lineResults(outcome, current.request_id),
      pending[pending.length - 1]!.line,
      options.leaseMs,
    );
    return {
      step: { kind: 'batch' },
      published: current.dry_run ? undefined : { organizationId: current.organization_id, outcome },
    };
  }

  /** The plans the import's lines archive, after every line (the import's subscriptions to them came first). */
  async function archivePlans(organizationId: string, importId: string): Promise<void> {
    const keys = await plansArchivedBy(db, importId);
    if (keys.length === 0) return;
    if (await archiveImportedPlans(db, organizationId, keys)) await publisher.publishCatalog(organizationId);
  }

  /**
   * Runs one batch again, with half its lines, when Postgres cancels one of its statements at the statement timeout
   * (a stalled disk, a lock held elsewhere, a batch too large for a loaded machine) or on request: the batch's
   * transaction was rolled back whole, so nothing of it is applied twice. The import's later batches keep the smaller
   * size, and a later timeout halves it again. A batch that times out BATCH_TIMEOUT_TRIES times in a row fails the
   * import, the batches before it applied. A runner told to stop tries no more: the lease's next holder goes on.
   */
  function timeoutRetrying(importId: string) {
    let batchSize = options.batchSize;
    return async (batch: (batchSize: number) => Promise<StepResult>): Promise<StepResult> => {
      for (let tried = 1; ; tried++) {
        try {
          return await batch(batchSize);
        } catch (error) {
          if (tried >= BATCH_TIMEOUT_TRIES || !isStatementTimeout(error)) throw error;
          if (stopping) return { step: { kind: 'lost' } };
          const smaller = Math.max(1, Math.floor(batchSize / 2));
          log.warn(
            `import ${importId}: a batch of ${batchSize} lines reached the statement timeout; trying again with ${smaller}`,
          );
          batchSize = smaller;
        }
      }
    };
  }

  /**
   * Each batch's publish runs while the next batch is applied (they use different connections, and Redis), at most
   * one publish in flight: the next batch's publish starts once it is done, and the import ends only after the last, so
   * `succeeded` still means every gateway can serve every batch. A failed publish fails the import after the batch
   * being applied meanwhile (whose entry the relay publishes, as it does any entry its runner did not).
   */
  async function applyAll(importId: string): Promise<Step> {
    let publishing: Promise<void> = Promise.resolve();
    const retrying = timeoutRetrying(importId);
    for (;;) {
      if (stopping) {
        await publishing;
        return { kind: 'lost' };
      }
      const { step: done, published } = await retrying((batchSize) =>
        transact(db, (trx) => step(trx, importId, trx, batchSize)),
      );
      await publishing;
      if (published) {
        publishing = publish(published.organizationId, published.outcome);
        // Awaited once the next batch has committed, or at the end; until then its rejection is held, not unhandled.
        publishing.catch(() => {});
      }
      if (done.kind !== 'batch') {
        await publishing;
        return done;
      }
    }
  }

  /**
   * A dry run applies its batches in one transaction that is rolled back at the end (so a line may refer to a
   * record an earlier batch created), while each batch's results commit on their own. Each try of a batch runs inside
   * a savepoint of the dry transaction, so a try that failed (a timeout, or a deadlock `transact` runs again) leaves
   * nothing in it.
   */
  async function dryRunAll(importId: string): Promise<Step> {
    let last: Step = { kind: 'lost' };
    const retrying = timeoutRetrying(importId);
    try {
      await db.transaction().execute(async (dry) => {
        await DRY_RUN_IDLE_LIMIT.execute(dry);
        for (;;) {
          if (stopping) break;
          const { step: done } = await retrying((batchSize) =>
            transact(db, async (record) => {
              await DRY_RUN_IDLE_LIMIT.execute(record);
              return inSavepoint(dry, () => step(dry, importId, record, batchSize));
            }),
          );
          last = done;
          if (done.kind !== 'batch') break;
        }
        throw new DryRunRollback();
      });
    } catch (error) {
      if (!(error instanceof DryRunRollback)) throw error;
    }
    return last;
  }

  async function run(importId: string): Promise<void> {
    try {
      const mode = await db
        .selectFrom('imports')
        .select(['dry_run', 'applied_through'])
        .where('id', '=', importId)
        .executeTakeFirst();
      if (!mode) return;
      if (mode.dry_run && mode.applied_through > 0) {
        // The rolled-back state its later lines were checked against died with the process that held it.
        await finishImport(db, importId, owner, {
          status: 'failed',
          failure: 'The dry run was interrupted (its process stopped); run it again.',
        });
        return;
      }
      const done = mode.dry_run ? await dryRunAll(importId) : await applyAll(importId);
      if (done.kind !== 'done') return;
      if (!done.dryRun) await archivePlans(done.organizationId, importId);
      if (!done.dryRun && done.lines >= options.analyzeAtLines)
        await sql`SELECT analyze_imported_tables()`.execute(db);
      await finishImport(db, importId, owner, { status: 'succeeded', failure: null });
    } catch (error) {
      log.error(`import ${importId} failed: ${(error as Error).message}`);
      await finishImport(db, importId, owner, {
        status: 'failed',
        failure: `The import stopped on an internal error; the lines before the failing batch are applied (see applied).`,
      }).catch((finishError: unknown) => log.error(`import ${importId}: ${(finishError as Error).message}`));
    }
  }

  /** Applies an import this process holds the lease of, in the background. */
  function start(importId: string): void {
    if (running.has(importId) || stopping) return;
    running.set(
      importId,
      run(importId).finally(() => running.delete(importId)),
    );
  }

  /** Imports whose process died: a running one is taken over and resumed, a receiving one failed (its body is gone). */
  async function resumeAbandoned(): Promise<number> {
    let resumed = 0;
    for (const abandoned of await findAbandonedImports(db)) {
      if (abandoned.status === 'receiving') {
        await finishImport(db, abandoned.id, null, {
          status: 'failed',
          failure: 'The upload was interrupted before the whole body was received; nothing was applied.',
        });
        continue;
      }
      if (await takeExpiredLease(db, abandoned.id, owner, options.leaseMs)) {
        start(abandoned.id);
        resumed++;
      }
    }
    return resumed;
  }

  return {
    owner,
    leaseMs: options.leaseMs,
    start,
    resumeAbandoned,
    /** Resolves when every import this process is applying has ended (tests, shutdown). */
    idle: async () => {
      while (running.size > 0) await Promise.all(running.values());
    },
    /** Stops after the current batches: their leases expire and another process resumes them. */
    stop: async () => {
      stopping = true;
      await Promise.all(running.values());
    },
  };
}

export type ImportRunner = ReturnType<typeof createImportRunner>;
