import { sql, type Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { transact } from '@ent/common/outbox/record';
import type { RedisClient } from '@ent/common/redis/connect';
import { parseCreditDirtyMember, type RedisKeys } from '@ent/common/redis/keys';
import { recordDeliveries } from '../../webhook/dispatch.ts';
import { isRolloverField, parseRolloverField, recordRollovers, type Rollover } from './rollovers.ts';

export interface CreditSpentDeps {
  db: Kysely<Database>;
  redis: RedisClient;
  redisKeys: RedisKeys;
}

interface Drained {
  figures: { creditId: string; spent: number }[];
  rollovers: Rollover[];
}

/**
 * Takes credit members (`credit|<subscriber>|<feature>`) out of the organization's dirty set with their hashes'
 * contents, in one MULTI (atomic: a spend after it marks the member again): each credit's spent figure, and the
 * rollover records (`ro:<id>`) the gateway's Lua left for the worker.
 */
async function drainCreditMembers(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  members: readonly string[],
): Promise<Drained> {
  const parsed = members.map((member) => parseCreditDirtyMember(member)!);
  const multi = redis.multi().srem(keys.meteredDirty(organizationId), ...members);
  for (const { subscriberId, feature } of parsed)
    multi.hgetall(keys.creditSpent(organizationId, subscriberId, feature));
  const replies = (await multi.exec()) ?? [];
  const drained: Drained = { figures: [], rollovers: [] };
  parsed.forEach(({ subscriberId, feature }, i) => {
    const [error, hash] = replies[i + 1] ?? [null, {}];
    if (error) throw error;
    for (const [field, value] of Object.entries((hash ?? {}) as Record<string, string>)) {
      if (isRolloverField(field)) {
        const rollover = parseRolloverField(subscriberId, feature, field, value);
        if (rollover) drained.rollovers.push(rollover);
        continue;
      }
      const spent = Number(value);
      if (Number.isSafeInteger(spent) && spent >= 0) drained.figures.push({ creditId: field, spent });
    }
  });
  return drained;
}

/**
 * Persists what the named credit members hold: rollover credits first (recorded once each, with their
 * `credit.created` deliveries), then every spent figure into `credits.spent` (one UPDATE for the batch). Drain and
 * write run under one advisory lock per organization inside the write's transaction, so two workers' writes land
 * in the order of their drains and an older figure never overwrites a newer one. Answers the rows changed and the
 * deliveries to queue; on failure the caller marks the members dirty again.
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
    const { figures, rollovers } = await drainCreditMembers(redis, keys, organizationId, members);
    const events = await recordRollovers(trx, organizationId, rollovers, nowMs);
    let updated = 0;
    if (figures.length > 0) {
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
      updated = result.rows.length;
    }
    const deliveryIds = await recordDeliveries(trx, organizationId, events, new Date(nowMs));
    return { persisted: updated + events.length, deliveryIds };
  });
}
