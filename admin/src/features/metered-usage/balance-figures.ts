import type { Kysely } from 'kysely';
import { creditSpentNow } from '@ent/common/db/credit-columns';
import type { Database } from '@ent/common/db/database';
import {
  checkCreditsOf,
  creditsInSpendingOrder,
  spendingCreditsOf,
} from '@ent/common/metering/credit-answer';
import type { MeteredPeriod } from '@ent/common/metering/metered-period';
import type { RedisClient } from '@ent/common/redis/connect';
import { meteredMember, type RedisKeys } from '@ent/common/redis/keys';
import type { MeteredCredits, MeteredTerms } from '@ent/common/resolve/resolve';
import type { SubscriberDoc } from '@ent/common/snapshots/documents';
import { persistedFigures } from './current-usage-store.ts';

export interface BalanceToRead {
  feature: string;
  terms: MeteredTerms;
  period: MeteredPeriod;
}

export interface BalanceFigures {
  used: number;
  /** The credits as the gateway's check result lists them (same code: credit-answer.ts). */
  credits: MeteredCredits;
}

interface Hot {
  used: number | null;
  covered: number;
  rollover: number;
  spent: (number | null)[];
}

const numberOr = <T>(value: string | null | undefined, otherwise: T): number | T =>
  value === null || value === undefined || value === '' ? otherwise : Number(value);

/**
 * One subscriber's balances as an admin answer shows them (issue 35): used, and the live credits with what each has
 * left, in the spending order the gateway uses, counted in `remaining` as a check counts them. Figures are Redis's
 * (the hot copy: one round trip for every balance and credit-spent hash) where it holds them, else Postgres's (the
 * worker's copy, about a second behind), else 0. Redis unreachable: every figure is Postgres's.
 */
export async function readBalanceFigures(
  deps: { db: Kysely<Database>; redis: RedisClient; keys: RedisKeys },
  organizationId: string,
  subscriberId: string,
  subscriber: SubscriberDoc,
  balances: readonly BalanceToRead[],
  nowMs: number,
): Promise<{ figures: BalanceFigures[]; redisUnavailable: boolean }> {
  const { db, redis, keys } = deps;
  const lists = balances.map(({ feature, terms, period }) => {
    const rollsOver = terms.rollover !== null && period.endMs !== null;
    const { ordered, placeholder } = creditsInSpendingOrder(
      subscriber,
      subscriberId,
      feature,
      rollsOver ? { startMs: period.startMs, endMs: period.endMs! } : null,
      nowMs,
    );
    return spendingCreditsOf(ordered, placeholder);
  });

  let hot: Hot[] = balances.map((_, i) => ({
    used: null,
    covered: 0,
    rollover: 0,
    spent: lists[i]!.map(() => null),
  }));
  let redisUnavailable = false;
  try {
    const pipeline = redis.pipeline();
    balances.forEach(({ feature, period }, i) => {
      pipeline.hmget(
        keys.meteredBalance(organizationId, meteredMember(subscriberId, feature, period.startMs)),
        'u',
        'k',
        'ro',
      );
      const ids = lists[i]!.map(([id]) => id);
      if (ids.length > 0) pipeline.hmget(keys.creditSpent(organizationId, subscriberId, feature), ...ids);
    });
    const replies = (await pipeline.exec()) ?? [];
    const failed = replies.find(([error]) => error !== null);
    if (failed) throw failed[0];
    let at = 0;
    hot = balances.map((_, i) => {
      const [used, covered, rollover] = replies[at++]![1] as (string | null)[];
      const spent =
        lists[i]!.length === 0
          ? []
          : (replies[at++]![1] as (string | null)[]).map((figure) => numberOr(figure, null));
      return {
        used: numberOr(used, null),
        covered: numberOr(covered, 0),
        rollover: numberOr(rollover, 0),
        spent,
      };
    });
  } catch {
    redisUnavailable = true;
  }

  const cold = balances.filter((_, i) => hot[i]!.used === null);
  const missingSpent = lists.flatMap((list, i) =>
    list.filter((_, c) => hot[i]!.spent[c] === null).map(([id]) => id),
  );
  const [persisted, persistedSpent] = await Promise.all([
    persistedFigures(
      db,
      organizationId,
      subscriberId,
      cold.map(({ feature, period }) => ({ feature, periodStartMs: period.startMs })),
    ),
    spentOf(db, organizationId, missingSpent),
  ]);
  const figures = balances.map(({ feature, period }, i) => {
    const balance = hot[i]!;
    const durable = balance.used === null ? persisted.get(`${feature}|${period.startMs}`) : undefined;
    const spent = lists[i]!.map(([id], c) => balance.spent[c] ?? persistedSpent.get(id) ?? 0);
    const covered = balance.used === null ? (durable?.covered ?? 0) : balance.covered;
    const rollover = balance.used === null ? (durable?.rollover ?? 0) : balance.rollover;
    return {
      used: balance.used ?? durable?.used ?? 0,
      credits: checkCreditsOf(lists[i]!, { covered, rollover, spent }),
    };
  });
  return { figures, redisUnavailable };
}

/** What Postgres holds of these credits' spent, by id (a rollover credit not recorded yet is absent). */
async function spentOf(
  db: Kysely<Database>,
  organizationId: string,
  ids: readonly string[],
): Promise<Map<string, number>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('credits as c')
    .select(['c.id', creditSpentNow])
    .where('c.organization_id', '=', organizationId)
    .where('c.id', 'in', [...new Set(ids)])
    .execute();
  return new Map(rows.map((row) => [row.id, row.spent]));
}
