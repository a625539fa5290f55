import type { Kysely } from 'kysely';
import type { Clock } from '@ent/common/clock';
import type { Database } from '@ent/common/db/database';
import { transact } from '@ent/common/outbox/record';
import type { RedisClient } from '@ent/common/redis/connect';
import { isMeteredMember, parseCreditDirtyMember, type RedisKeys } from '@ent/common/redis/keys';
import type { Queues } from '../../../jobs/queues.ts';
import { enqueueDeliveries, recordDeliveries } from '../../webhook/dispatch.ts';
import { recordRollovers, rolloversOf } from './rollovers.ts';
import { persistCreditSpent } from './spent.ts';

export interface CreditPersistenceDeps {
  db: Kysely<Database>;
  redis: RedisClient;
  redisKeys: RedisKeys;
  clock: Clock;
  queues: Pick<Queues, 'webhook-delivery'>;
  log: { warn(message: string): void };
}

/**
 * Splits a drain's candidates: balance members go to the balance drain, credit members (`credit|<subscriber>|
 * <feature>`) to `persistSpent`. A member that can be read both ways (subscriber `credit`, a feature key of digits)
 * goes to both: each drain takes it out of the set and reads its own key, so neither loses a change.
 */
export function splitDirtyMembers(members: readonly string[]): { balances: string[]; credits: string[] } {
  const balances: string[] = [];
  const credits: string[] = [];
  for (const member of members) {
    const credit = parseCreditDirtyMember(member) !== undefined;
    if (credit) credits.push(member);
    if (!credit || isMeteredMember(member)) balances.push(member);
  }
  return { balances, credits };
}

/** Credits' share of the metered persister (issue 35): spent figures, and rollover credits made by the gateway. */
export function creditPersistence(deps: CreditPersistenceDeps) {
  const queue = (deliveryIds: string[]) =>
    enqueueDeliveries(deps.queues, deliveryIds).catch((error: unknown) =>
      deps.log.warn(`credits: webhook deliveries not queued (${(error as Error).message}); the sweep will`),
    );

  /** Spent figures of credit members into `credits.spent`; answers the rows changed. */
  async function persistSpent(organizationId: string, members: readonly string[]): Promise<number> {
    if (members.length === 0) return 0;
    const { persisted, deliveryIds } = await persistCreditSpent(
      deps,
      organizationId,
      members,
      deps.clock.now(),
    );
    await queue(deliveryIds);
    return persisted;
  }

  /**
   * The rollover credits the drained balances carry (the gateway's Lua sets `ro` when it makes a period's hash),
   * recorded once each with their `credit.created`; answers how many rows this call inserted.
   */
  async function persistRollovers(
    organizationId: string,
    balances: readonly { subscriberId: string; feature: string; periodStartMs: number }[],
  ): Promise<number> {
    const rollovers = await rolloversOf(deps.redis, deps.redisKeys, organizationId, balances);
    if (rollovers.length === 0) return 0;
    const nowMs = deps.clock.now();
    const { inserted, deliveryIds } = await transact(deps.db, async (trx) => {
      const events = await recordRollovers(trx, organizationId, rollovers, nowMs);
      const ids = await recordDeliveries(trx, organizationId, events, new Date(nowMs));
      return { inserted: events.length, deliveryIds: ids };
    });
    await queue(deliveryIds);
    return inserted;
  }

  return { persistSpent, persistRollovers };
}
