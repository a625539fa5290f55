import { sql, type Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { transact } from '@ent/common/outbox/record';
import type { RedisClient } from '@ent/common/redis/connect';
import { parseCreditDirtyMember, type RedisKeys } from '@ent/common/redis/keys';
import { recordDeliveries } from '../../webhook/dispatch.ts';
import type { DomainEvent } from '../../shared/write/outcome.ts';
import { recordRollovers, rolloverPeriodStart, rolloversOf } from './rollovers.ts';

export interface CreditSpentDeps {
  db: Kysely<Database>;
  redis: RedisClient;
  redisKeys: RedisKeys;
}

interface SpentFigure {
  subscriberId: string;
  feature: string;
  creditId: string;
  spent: number;
}

/**
 * Takes credit members (`credit|<subscriber>|<feature>`) out of the organization's dirty set with their hashes'
 * figures, in one MULTI (atomic: a spend after it marks the member again).
 */
async function drainCreditMembers(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  members: readonly string[],
): Promise<SpentFigure[]> {
  const parsed = members.map((member) => parseCreditDirtyMember(member)!);
  const multi = redis.multi().srem(keys.meteredDirty(organizationId), ...members);
  for (const { subscriberId, feature } of parsed)
    multi.hgetall(keys.creditSpent(organizationId, subscriberId, feature));
  const replies = (await multi.exec()) ?? [];
  const figures: SpentFigure[] = [];
  parsed.forEach(({ subscriberId, feature }, i) => {
    const [error, hash] = replies[i + 1] ?? [null, {}];
    if (error) throw error;
    for (const [creditId, spent] of Object.entries((hash ?? {}) as Record<string, string>)) {
      const value = Number(spent);
      if (Number.isSafeInteger(value) && value >= 0)
        figures.push({ subscriberId, feature, creditId, spent: value });
    }
  });
  return figures;
}

/**
 * Persists the spent figures of the named credit members to `credits.spent` (one UPDATE for the batch). Drain and
 * write run under one advisory lock per organization inside the write's transaction, so two workers' writes land
 * in the order of their drains and an older figure never overwrites a newer one. A spent figure of a rollover
 * credit whose row is not recorded yet (its balance not drained yet) records it first, from the balance hash.
 * The `credit.created` deliveries of rollover rows it inserted commit with it; answers their ids for the caller to
 * queue. On failure the members go back (the caller marks them dirty again).
 */
export async function persistCreditSpent(
  deps: CreditSpentDeps,
  organizationId: string,
  members: readonly string[],
  nowMs: number,
): Promise<{ persisted: number; deliveryIds: string[] }> {
  if (members.length === 0) return { persisted: 0, deliveryIds: [] };
  const { db, redis, redisKeys: keys } = deps;
  return transact(db, async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtext(${`credit-spent:${organizationId}`}))`.execute(trx);
    const figures = await drainCreditMembers(redis, keys, organizationId, members);
    if (figures.length === 0) return { persisted: 0, deliveryIds: [] };
    const rolloverIds = figures.filter((figure) => rolloverPeriodStart(figure.creditId) !== undefined);
    let events: DomainEvent[] = [];
    if (rolloverIds.length > 0) {
      const existing = await trx
        .selectFrom('credits')
        .select('id')
        .where('organization_id', '=', organizationId)
        .where(
          'id',
          'in',
          rolloverIds.map((figure) => figure.creditId),
        )
        .execute();
      const recorded = new Set(existing.map((row) => row.id));
      const missing = rolloverIds.filter((figure) => !recorded.has(figure.creditId));
      const rollovers = await rolloversOf(
        redis,
        keys,
        organizationId,
        missing.map((figure) => ({
          subscriberId: figure.subscriberId,
          feature: figure.feature,
          periodStartMs: rolloverPeriodStart(figure.creditId)!,
        })),
      );
      events = await recordRollovers(trx, organizationId, rollovers, nowMs);
    }
    const sorted = [...figures].sort((a, b) =>
      a.creditId < b.creditId ? -1 : a.creditId > b.creditId ? 1 : 0,
    );
    const result = await sql<{ id: string }>`
      UPDATE credits AS c SET spent = f.spent
      FROM unnest(${sorted.map((figure) => figure.creditId)}::text[], ${sorted.map((figure) => figure.spent)}::bigint[])
        AS f(id, spent)
      WHERE c.organization_id = ${organizationId} AND c.id = f.id AND c.spent <> f.spent
      RETURNING c.id
    `.execute(trx);
    const deliveryIds = await recordDeliveries(trx, organizationId, events, new Date(nowMs));
    return { persisted: result.rows.length, deliveryIds };
  });
}
