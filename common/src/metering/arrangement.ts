import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { notFound } from '../errors/app-error.ts';
import { recordOutbox, transact } from '../outbox/record.ts';
import { withScripts } from '../redis/commands.ts';
import type { RedisClient } from '../redis/connect.ts';
import type { RedisKeys } from '../redis/keys.ts';
import { periodOf, usageTtlMs } from './period.ts';

/** An organization's eval arrangement: Postgres is the source of truth, Redis the copy the gate reads. */
export interface Arrangement {
  /** Allotment key reported by usage; null when no allotment applies. */
  plan: string | null;
  /** Evals per UTC month; null = unlimited. */
  evalLimit: number | null;
  blocking: boolean;
  burstPerSecond: number;
  /** Metered usage events (reports, batch events) per second; absent: DEFAULT_USAGE_EVENTS_PER_SECOND. */
  usageEventsPerSecond?: number;
}

/** Usage events per second an organization may report unless its arrangement says otherwise (DESIGN.md §5). */
export const DEFAULT_USAGE_EVENTS_PER_SECOND = 1000;

/** An arrangement as read from Postgres: its version (Postgres arrangement_version + 1) orders publishes. */
export type VersionedArrangement = Arrangement & { version: number };

export const SELF_SERVE_ARRANGEMENT: Arrangement = {
  plan: 'free',
  evalLimit: 250_000,
  blocking: true,
  burstPerSecond: 100,
  usageEventsPerSecond: DEFAULT_USAGE_EVENTS_PER_SECOND,
};

/** Plan key given to a capped arrangement that names none (e.g. a limit set on a formerly unlimited org). */
const INDIVIDUAL_PLAN = 'individual';

export interface ArrangementChange {
  plan?: string;
  evalLimit?: number;
  unlimited?: boolean;
  blocking?: boolean;
  burstPerSecond?: number;
  usageEventsPerSecond?: number;
}

/**
 * Merge semantics of `entctl org arrangement`: what is not given keeps its value. `unlimited` without a
 * plan clears the plan (no allotment applies); a cap without any plan key reports `individual`.
 */
export function applyArrangementChange(current: Arrangement, change: ArrangementChange): Arrangement {
  const evalLimit = change.unlimited ? null : (change.evalLimit ?? current.evalLimit);
  let plan = change.plan ?? (change.unlimited ? null : current.plan);
  if (plan === null && evalLimit !== null) plan = INDIVIDUAL_PLAN;
  return {
    plan,
    evalLimit,
    blocking: change.blocking ?? current.blocking,
    burstPerSecond: change.burstPerSecond ?? current.burstPerSecond,
    usageEventsPerSecond:
      change.usageEventsPerSecond ?? current.usageEventsPerSecond ?? DEFAULT_USAGE_EVENTS_PER_SECOND,
  };
}

type Db = Kysely<Database>;

export async function getArrangement(db: Db, organizationId: string): Promise<VersionedArrangement> {
  const row = await db
    .selectFrom('organizations')
    .select([
      'eval_plan',
      'eval_limit',
      'eval_blocking',
      'eval_burst',
      'usage_events_per_second',
      'arrangement_version',
    ])
    .where('id', '=', organizationId)
    .executeTakeFirst();
  if (!row) throw notFound(`No organization ${organizationId}.`);
  return {
    plan: row.eval_plan,
    evalLimit: row.eval_limit,
    blocking: row.eval_blocking,
    burstPerSecond: row.eval_burst,
    usageEventsPerSecond: row.usage_events_per_second,
    version: row.arrangement_version + 1,
  };
}

/** Saves the arrangement and records its outbox entry in one transaction; returns the new version. */
export async function saveArrangement(
  db: Db,
  organizationId: string,
  arrangement: Arrangement,
): Promise<number> {
  return transact(db, async (trx) => {
    const row = await trx
      .updateTable('organizations')
      .set({
        eval_plan: arrangement.plan,
        eval_limit: arrangement.evalLimit,
        eval_blocking: arrangement.blocking,
        eval_burst: arrangement.burstPerSecond,
        usage_events_per_second: arrangement.usageEventsPerSecond ?? DEFAULT_USAGE_EVENTS_PER_SECOND,
        arrangement_version: sql`arrangement_version + 1`,
        updated_at: new Date(),
      })
      .where('id', '=', organizationId)
      .returning('arrangement_version')
      .executeTakeFirst();
    if (!row) throw notFound(`No organization ${organizationId}.`);
    await recordOutbox(trx, { organizationId, kind: 'arrangement', version: row.arrangement_version });
    return row.arrangement_version + 1;
  });
}

/**
 * The Redis copy of the arrangement that the gate script reads on every eval, so a change applies on the
 * next eval on every gateway. One atomic script: a versioned arrangement never replaces a newer one; one
 * without a version (tests, tools) is written as given. Empty `limit` = unlimited; empty `plan` = none.
 * Writing it also settles the month's first_over_at against the new limit (arrangement-put-2.lua).
 * Returns false when Redis already held the same or a newer version.
 */
export async function publishArrangement(
  redis: RedisClient,
  keys: Pick<RedisKeys, 'arrangement' | 'evalUsage'>,
  organizationId: string,
  arrangement: Arrangement & { version?: number },
  nowMs = Date.now(),
): Promise<boolean> {
  const written = await withScripts(redis).entArrangementPut(
    keys.arrangement(organizationId),
    keys.evalUsage(organizationId, periodOf(nowMs)),
    arrangement.version ?? 0,
    arrangement.evalLimit === null ? '' : String(arrangement.evalLimit),
    arrangement.blocking ? '1' : '0',
    String(arrangement.burstPerSecond),
    arrangement.plan ?? '',
    nowMs,
    usageTtlMs(nowMs),
    String(arrangement.usageEventsPerSecond ?? DEFAULT_USAGE_EVENTS_PER_SECOND),
  );
  return written === 1;
}

/** The arrangement as `publishArrangement` wrote it to Redis; null when Redis holds none. */
export async function readPublishedArrangement(
  redis: Pick<RedisClient, 'hmget'>,
  keys: Pick<RedisKeys, 'arrangement'>,
  organizationId: string,
): Promise<Arrangement | null> {
  const [limit, blocking, burst, plan] = await redis.hmget(
    keys.arrangement(organizationId),
    'limit',
    'blocking',
    'burst',
    'plan',
  );
  if (!burst) return null;
  return {
    plan: plan || null,
    evalLimit: limit ? Number(limit) : null,
    blocking: blocking === '1',
    burstPerSecond: Number(burst),
  };
}
