import { balanceTtlMs } from './metered-period.ts';
import type { RedisKeys } from '../redis/keys.ts';

/**
 * The arguments of metered-refill-2.lua (after its two keys): the balances and credit-spent figures to merge into a
 * Redis that came back without them, each the largest known. Built by a gateway (Postgres's figures merged with its
 * own) and by admin before a correction (Postgres's figures of one balance's owner).
 */

/** One balance to merge, by its member. */
export interface RefillBalance {
  used: number;
  revision: number;
  periodEndMs: number | null;
  covered: number;
  rollover: number;
}

/** The spent figures of one (subscriber, feature)'s credits, by the hash's dirty member. */
export interface RefillSpent {
  subscriberId: string;
  feature: string;
  figures: ReadonlyMap<string, number>;
}

export function refillArguments(
  keys: RedisKeys,
  organizationId: string,
  balances: ReadonlyMap<string, RefillBalance>,
  spent: ReadonlyMap<string, RefillSpent>,
  nowMs: number,
  markReady: boolean,
): (string | number)[] {
  const args: (string | number)[] = [
    keys.meteredBalance(organizationId, ''),
    markReady ? '1' : '0',
    balances.size,
  ];
  for (const [member, { used, revision, periodEndMs, covered, rollover }] of balances) {
    const ttl = balanceTtlMs(periodEndMs, nowMs) ?? '';
    args.push(member, used, revision, periodEndMs ?? '', ttl, covered, rollover);
  }
  for (const [member, { subscriberId, feature, figures }] of spent) {
    args.push(keys.creditSpent(organizationId, subscriberId, feature), member, figures.size);
    for (const [creditId, figure] of figures) args.push(creditId, figure);
  }
  return args;
}
