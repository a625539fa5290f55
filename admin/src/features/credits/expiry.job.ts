import { sql } from 'kysely';
import { CREDIT_COLUMNS, keptCreditFigures } from '@ent/common/db/credit-columns';
import { transact } from '@ent/common/outbox/record';
import { redisKeys } from '@ent/common/redis/keys';
import type { JobDefinition, JobDependencies } from '../../jobs/job.ts';
import type { Queues } from '../../jobs/queues.ts';
import { enqueueDeliveries, recordDeliveries } from '../webhook/dispatch.ts';
import { toCreditBody } from './body.ts';
import { currentSpent } from './spent.ts';
import { foldSettledCreditFigures } from './worker/fold.ts';
import type { CreditWithFeature } from './store.ts';

declare module '../../jobs/queues.ts' {
  interface QueuePayloads {
    /** Repeatable: raise `credit.expired` once for each credit whose expiry has passed (issue 35). */
    'credit-expiry': Record<string, never>;
  }
}

export interface CreditExpiryOptions {
  batchSize: number;
  /** Bounds one run; the next run goes on with what is left. */
  maxBatches: number;
}

const defaultCreditExpiryOptions: CreditExpiryOptions = { batchSize: 500, maxBatches: 20 };

/**
 * Raises `credit.expired` for credits whose expiry has passed, not voided, not raised yet: each batch marks its
 * rows (`expired_event_at`) and records their webhook deliveries in one transaction, so each credit's event goes
 * out once; rows another worker holds are skipped, not waited on. Answers how many expired.
 */
export async function raiseExpiredCredits(
  deps: Pick<JobDependencies, 'db' | 'redis' | 'clock'> & {
    queues: Pick<Queues, 'webhook-delivery'>;
    redisKeyPrefix: string;
  },
  overrides: Partial<CreditExpiryOptions> = {},
): Promise<{ expired: number }> {
  const options = { ...defaultCreditExpiryOptions, ...overrides };
  const keys = redisKeys(deps.redisKeyPrefix);
  let expired = 0;
  for (let batch = 0; batch < options.maxBatches; batch++) {
    const nowMs = deps.clock.now();
    const now = new Date(nowMs);
    const { count, deliveryIds } = await transact(deps.db, async (trx) => {
      const due = await trx
        .selectFrom('credits as c')
        .innerJoin('features as f', 'f.id', 'c.feature_id')
        .select([...CREDIT_COLUMNS, 'f.key as feature_key'])
        .where('c.expired_event_at', 'is', null)
        .where('c.voided_at', 'is', null)
        .where('c.expires_at', '<=', now)
        .orderBy('c.expires_at')
        .limit(options.batchSize)
        .modifyEnd(sql`FOR UPDATE OF c SKIP LOCKED`)
        .execute();
      if (due.length === 0) return { count: 0, deliveryIds: [] };
      const kept = keptCreditFigures('c');
      await sql`
        UPDATE credits AS c SET expired_event_at = ${now}, spent = ${kept.spent}, spent_seq = ${kept.spent_seq}
        FROM unnest(${due.map((credit) => credit.organization_id)}::text[], ${due.map((credit) => credit.id)}::text[])
          AS d(organization_id, id)
        WHERE c.organization_id = d.organization_id AND c.id = d.id
      `.execute(trx);
      const ids: string[] = [];
      for (const [organizationId, credits] of byOrganization(due)) {
        const spent = await currentSpent(deps.redis, keys, organizationId, credits);
        const events = credits.map((credit) => ({
          type: 'credit.expired',
          data: { credit: toCreditBody(credit, spent.get(credit.id) ?? credit.spent, nowMs) },
        }));
        ids.push(...(await recordDeliveries(trx, organizationId, events, now)));
      }
      return { count: due.length, deliveryIds: ids };
    });
    expired += count;
    // Committed: a delivery whose enqueue fails stays pending and the webhook sweep queues it.
    await enqueueDeliveries(deps.queues, deliveryIds).catch(() => undefined);
    if (count < options.batchSize) break;
  }
  return { expired };
}

function byOrganization(credits: readonly CreditWithFeature[]): Map<string, CreditWithFeature[]> {
  const groups = new Map<string, CreditWithFeature[]>();
  for (const credit of credits) {
    const group = groups.get(credit.organization_id) ?? [];
    group.push(credit);
    groups.set(credit.organization_id, group);
  }
  return groups;
}

export const creditExpiryJob: JobDefinition<'credit-expiry'> = {
  queue: 'credit-expiry',
  // The same sweep folds settled balance rows' credit figures into the credits (worker/fold.ts).
  processor: (deps) => async () => {
    const { expired } = await raiseExpiredCredits({ ...deps, redisKeyPrefix: deps.config.redisKeyPrefix });
    const folded = await foldSettledCreditFigures(deps.db, deps.clock.now());
    return { expired, folded };
  },
  concurrency: 1,
  repeatEveryMs: 30_000,
  repeatPayload: {},
};
