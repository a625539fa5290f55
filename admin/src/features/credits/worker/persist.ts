import type { Kysely } from 'kysely';
import type { Clock } from '@ent/common/clock';
import type { Database } from '@ent/common/db/database';
import type { RedisClient } from '@ent/common/redis/connect';
import { isMeteredMember, parseCreditDirtyMember, type RedisKeys } from '@ent/common/redis/keys';
import type { Queues } from '../../../jobs/queues.ts';
import { enqueueDeliveries } from '../../webhook/dispatch.ts';
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
export function splitDirtyMembers(members: readonly string[]): { balances: string[]; others: string[] } {
  const balances: string[] = [];
  const credits: string[] = [];
  for (const member of members) {
    const credit = parseCreditDirtyMember(member) !== undefined;
    if (credit) credits.push(member);
    if (!credit || isMeteredMember(member)) balances.push(member);
  }
  return { balances, others: credits };
}

/** Credits' share of the metered persister (issue 35): spent figures, and rollover credits made by the gateway. */
export function creditPersistence(deps: CreditPersistenceDeps) {
  const queue = (deliveryIds: string[]) =>
    enqueueDeliveries(deps.queues, deliveryIds).catch((error: unknown) =>
      deps.log.warn(`credits: webhook deliveries not queued (${(error as Error).message}); the sweep will`),
    );

  /** Rollover records and spent figures of credit members into `credits`; answers the rows changed. */
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

  return { persistSpent };
}
