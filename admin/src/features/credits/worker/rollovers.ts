import { createHash } from 'node:crypto';
import type { Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import type { RedisClient } from '@ent/common/redis/connect';
import { meteredMember, type RedisKeys } from '@ent/common/redis/keys';
import { DEFAULT_CREDIT_PRIORITY } from '@ent/contract/credits';
import type { DomainEvent } from '../../shared/write/outcome.ts';
import { toCreditBody } from '../body.ts';

/** A period's rollover as the gateway's Lua left it on the new period's balance hash (field `ro`). */
export interface Rollover {
  subscriberId: string;
  feature: string;
  /** The new period, whose first touch made the credit: it takes effect at its start and expires at its end. */
  periodStartMs: number;
  periodEndMs: number | null;
  amount: number;
}

/**
 * The id the gateway's Lua gives the implicit credit: `cr_ro_<period start ms>_<first 16 hex of SHA-1 of
 * "subscriber|feature">`, so the worker's row and the gateway's spent figures name the same credit.
 */
export const rolloverCreditId = (subscriberId: string, feature: string, periodStartMs: number): string =>
  `cr_ro_${periodStartMs}_${createHash('sha1').update(`${subscriberId}|${feature}`).digest('hex').slice(0, 16)}`;

const ROLLOVER_ID = /^cr_ro_(\d+)_[0-9a-f]{16}$/;

/** The period start a rollover credit id names; undefined for any other id. */
export function rolloverPeriodStart(creditId: string): number | undefined {
  const match = ROLLOVER_ID.exec(creditId);
  return match ? Number(match[1]) : undefined;
}

/**
 * The rollovers these balances carry: one HMGET (`ro`, `e`) per balance, in one pipeline. A balance without `ro`
 * (no rollover on its grant, or nothing left over) or with 0 carries none.
 */
export async function rolloversOf(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  balances: readonly { subscriberId: string; feature: string; periodStartMs: number }[],
): Promise<Rollover[]> {
  if (balances.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const balance of balances) {
    const member = meteredMember(balance.subscriberId, balance.feature, balance.periodStartMs);
    pipeline.hmget(keys.meteredBalance(organizationId, member), 'ro', 'e');
  }
  const replies = (await pipeline.exec()) ?? [];
  const rollovers: Rollover[] = [];
  balances.forEach((balance, i) => {
    const [error, reply] = replies[i] ?? [null, null];
    if (error) throw error;
    const [ro, end] = (reply as (string | null)[] | null) ?? [null, null];
    const amount = ro === null || ro === undefined ? 0 : Number(ro);
    if (!(amount > 0)) return;
    rollovers.push({
      subscriberId: balance.subscriberId,
      feature: balance.feature,
      periodStartMs: balance.periodStartMs,
      periodEndMs: end === null || end === undefined || end === '' ? null : Number(end),
      amount,
    });
  });
  return rollovers;
}

/**
 * Records rollover credits as `credits` rows, each once however many workers race (ON CONFLICT DO NOTHING on the
 * id and on the one-per-period index); answers the `credit.created` events of the rows this call inserted.
 */
export async function recordRollovers(
  trx: Transaction<Database>,
  organizationId: string,
  rollovers: readonly Rollover[],
  nowMs: number,
): Promise<DomainEvent[]> {
  if (rollovers.length === 0) return [];
  const features = await trx
    .selectFrom('features')
    .select(['id', 'key'])
    .where('organization_id', '=', organizationId)
    .where('key', 'in', [...new Set(rollovers.map((rollover) => rollover.feature))])
    .where('kind', '=', 'metered')
    .execute();
  const featureIds = new Map(features.map((feature) => [feature.key, feature.id]));
  const rows = rollovers
    .filter((rollover) => featureIds.has(rollover.feature))
    .map((rollover) => {
      const start = new Date(rollover.periodStartMs);
      return {
        id: rolloverCreditId(rollover.subscriberId, rollover.feature, rollover.periodStartMs),
        organization_id: organizationId,
        subscriber_id: rollover.subscriberId,
        feature_id: featureIds.get(rollover.feature)!,
        name: null,
        amount: rollover.amount,
        priority: DEFAULT_CREDIT_PRIORITY,
        effective_at: start,
        expires_at: rollover.periodEndMs === null ? null : new Date(rollover.periodEndMs),
        source: 'rollover' as const,
        source_period_start: start,
        created_at: start,
      };
    })
    // Id order: concurrent writers insert in one order and cannot deadlock on each other.
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  if (rows.length === 0) return [];
  const subscribers = await trx
    .selectFrom('subscribers')
    .select('subscriber_id')
    .where('organization_id', '=', organizationId)
    .where('subscriber_id', 'in', [...new Set(rows.map((row) => row.subscriber_id))])
    .execute();
  const known = new Set(subscribers.map((row) => row.subscriber_id));
  const insertable = rows.filter((row) => known.has(row.subscriber_id));
  if (insertable.length === 0) return [];
  const inserted = await trx
    .insertInto('credits')
    .values(insertable)
    .onConflict((conflict) => conflict.doNothing())
    .returningAll()
    .execute();
  const keyOf = new Map(features.map((feature) => [feature.id, feature.key]));
  return inserted.map((credit) => ({
    type: 'credit.created',
    data: { credit: toCreditBody({ ...credit, feature_key: keyOf.get(credit.feature_id)! }, 0, nowMs) },
  }));
}
