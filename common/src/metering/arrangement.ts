import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { notFound } from '../errors/app-error.ts';
import type { RedisClient } from '../redis/connect.ts';
import type { RedisKeys } from '../redis/keys.ts';

/** An organization's eval arrangement: Postgres is the source of truth, Redis the copy the gate reads. */
export interface Arrangement {
  /** Allotment key reported by usage; null when no allotment applies. */
  plan: string | null;
  /** Evals per UTC month; null = unlimited. */
  evalLimit: number | null;
  blocking: boolean;
  burstPerSecond: number;
}

export const SELF_SERVE_ARRANGEMENT: Arrangement = {
  plan: 'free',
  evalLimit: 250_000,
  blocking: true,
  burstPerSecond: 100,
};

/** Plan key given to a capped arrangement that names none (e.g. a limit set on a formerly unlimited org). */
export const INDIVIDUAL_PLAN = 'individual';

export interface ArrangementChange {
  plan?: string;
  evalLimit?: number;
  unlimited?: boolean;
  blocking?: boolean;
  burstPerSecond?: number;
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
  };
}

type Db = Pick<Kysely<Database>, 'selectFrom' | 'updateTable'>;

export async function getArrangement(db: Db, organizationId: string): Promise<Arrangement> {
  const row = await db
    .selectFrom('organizations')
    .select(['eval_plan', 'eval_limit', 'eval_blocking', 'eval_burst'])
    .where('id', '=', organizationId)
    .executeTakeFirst();
  if (!row) throw notFound(`No organization ${organizationId}.`);
  return {
    plan: row.eval_plan,
    evalLimit: row.eval_limit,
    blocking: row.eval_blocking,
    burstPerSecond: row.eval_burst,
  };
}

export async function saveArrangement(
  db: Db,
  organizationId: string,
  arrangement: Arrangement,
): Promise<void> {
  const result = await db
    .updateTable('organizations')
    .set({
      eval_plan: arrangement.plan,
      eval_limit: arrangement.evalLimit,
      eval_blocking: arrangement.blocking,
      eval_burst: arrangement.burstPerSecond,
      updated_at: new Date(),
    })
    .where('id', '=', organizationId)
    .executeTakeFirst();
  if (result.numUpdatedRows === 0n) throw notFound(`No organization ${organizationId}.`);
}

/**
 * The Redis copy of the arrangement that the gate script reads on every eval, so a change applies on the
 * next eval on every gateway. One HSET of every field (atomic). Empty `limit` = unlimited; empty `plan` = none.
 */
export async function publishArrangement(
  redis: Pick<RedisClient, 'hset'>,
  keys: Pick<RedisKeys, 'arrangement'>,
  organizationId: string,
  arrangement: Arrangement,
): Promise<void> {
  await redis.hset(keys.arrangement(organizationId), {
    limit: arrangement.evalLimit === null ? '' : String(arrangement.evalLimit),
    blocking: arrangement.blocking ? '1' : '0',
    burst: String(arrangement.burstPerSecond),
    plan: arrangement.plan ?? '',
  });
}
