import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';

/** How long and how often startBlockedBy looks for the statement's lock wait. */
const WAIT_DEADLINE_MS = 10_000;
const WAIT_POLLS = 500;
const POLL_MS = 20;

export const pidOf = async (db: Transaction<Database>) =>
  (await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(db)).rows[0]!.pid;

/** Whether another transaction holds the row `lockNowait` (a `... FOR UPDATE NOWAIT`) locks: it fails with 55P03. */
export async function heldElsewhere(
  trx: Transaction<Database>,
  lockNowait: RawBuilder<unknown>,
): Promise<boolean> {
  await sql`SAVEPOINT probe`.execute(trx);
  try {
    await lockNowait.execute(trx);
    return false;
  } catch (error) {
    if ((error as { code?: string }).code !== '55P03') throw error;
    return true;
  } finally {
    // Drops the probe's own lock too, when it took one.
    await sql`ROLLBACK TO SAVEPOINT probe`.execute(trx);
  }
}

export type Outcome<T> = { ok: true; result: T } | { ok: false; error: unknown };

/**
 * Starts `statement` in a transaction of its own on `db` (with `settings` first) and answers once it waits on a lock
 * the backend `holderPid` holds (seen through `observer`), with its outcome to await (in an object: an async
 * function's promise would adopt it); throws when it never waits (bounded in polls and in time).
 */
export async function startBlockedBy<T>(
  db: Kysely<Database>,
  observer: Kysely<Database>,
  holderPid: number,
  statement: (trx: Transaction<Database>) => Promise<T>,
  settings: readonly { execute: (db: Transaction<Database>) => Promise<unknown> }[] = [],
): Promise<{ outcome: Promise<Outcome<T>> }> {
  let statementPid: number | undefined;
  const outcome: Promise<Outcome<T>> = db
    .transaction()
    .execute(async (trx) => {
      await sql`SET LOCAL lock_timeout = '20s'`.execute(trx);
      for (const setting of settings) await setting.execute(trx);
      statementPid = await pidOf(trx);
      return statement(trx);
    })
    .then(
      (result) => ({ ok: true as const, result }),
      (error: unknown) => ({ ok: false as const, error }),
    );
  let finished = false;
  void outcome.then(() => (finished = true));
  if (
    await waitsOn(
      observer,
      holderPid,
      () => statementPid,
      () => finished,
    )
  )
    return { outcome };
  throw Object.assign(new Error('the statement never waited on the holder'), { outcome });
}

/**
 * Whether a backend comes to wait on a lock the backend `holderPid` holds, polled until it does, `stop()` says to give
 * up, or the bounds in polls and time pass. `waiter`: any backend (null), or the one it names (not polled for while it
 * names none yet).
 */
async function waitsOn(
  observer: Kysely<Database>,
  holderPid: number,
  waiter: (() => number | undefined) | null,
  stop: () => boolean = () => false,
): Promise<boolean> {
  const deadline = Date.now() + WAIT_DEADLINE_MS;
  for (let poll = 0; poll < WAIT_POLLS && Date.now() < deadline && !stop(); poll++) {
    const pid = waiter ? waiter() : null;
    if (pid !== undefined) {
      const { rows } = await sql<{ blocked: boolean }>`
        SELECT EXISTS (
          SELECT 1 FROM pg_stat_activity
          WHERE wait_event_type = 'Lock' AND ${holderPid}::int = ANY(pg_blocking_pids(pid))
            AND (${pid}::int IS NULL OR pid = ${pid}::int)
        ) AS blocked
      `.execute(observer);
      if (rows[0]?.blocked) return true;
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  return false;
}

/** Answers once some backend waits on a lock the backend `holderPid` holds; throws when none does (bounded). */
export async function someoneBlockedBy(observer: Kysely<Database>, holderPid: number): Promise<void> {
  if (!(await waitsOn(observer, holderPid, null))) throw new Error(`nothing waited on backend ${holderPid}`);
}
