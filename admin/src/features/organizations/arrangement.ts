import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { notFound } from '@ent/common/errors/app-error';
import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';

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

export async function getArrangement(db: Kysely<Database>, organizationId: string): Promise<Arrangement> {
  const row = await db
    .selectFrom('organizations')
    .select(['eval_plan', 'eval_limit', 'eval_blocking', 'eval_burst'])
    .where('id', '=', organizationId)
    .executeTakeFirst();
  if (!row) throw notFound(`No organization ${organizationId}.`);
  return { plan: row.eval_plan, evalLimit: row.eval_limit, blocking: row.eval_blocking, burstPerSecond: row.eval_burst };
}

export async function saveArrangement(
  db: Kysely<Database>,
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
 * Redis copy of the arrangement that the metering script reads on every eval, so a change applies on the
 * next eval on every gateway. Empty `limit` = unlimited.
 */
export async function publishArrangement(
  redis: RedisClient,
  keys: RedisKeys,
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
