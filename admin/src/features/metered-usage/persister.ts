import { sql, type Kysely } from 'kysely';
import type { Clock } from '@ent/common/clock';
import type { Database } from '@ent/common/db/database';
import type { RedisClient } from '@ent/common/redis/connect';
import { meteredMember, type RedisKeys } from '@ent/common/redis/keys';
import type { Queues } from '../../jobs/queues.ts';
import { persistCreditHashes } from '../credits/worker/spent.ts';
import { enqueueDeliveries, recordDeliveries } from '../webhook/dispatch.ts';
import {
  drainBalances,
  markDirty,
  retireIfClean,
  type Drained,
  type DrainedBalance,
} from './balance-scripts.ts';
import { recordReachedThresholds, upsertBalances, type ReachedThreshold } from './persist-store.ts';
import { createRecordedThresholds } from './recorded-thresholds.ts';
import { governingLimit, thresholdsReached, type UsageThreshold } from './thresholds.ts';
import { createGoverningDocs } from './governing-docs.ts';

export interface MeteredPersisterDeps {
  db: Kysely<Database>;
  redis: RedisClient;
  redisKeys: RedisKeys;
  clock: Clock;
  queues: Pick<Queues, 'webhook-delivery'>;
  log: { warn(message: string): void; error(message: string): void };
}

export interface MeteredPersisterOptions {
  /** How often the dirty sets are drained (DESIGN.md §5: at least every second). */
  everyMs: number;
  /** Members one drain call takes, and so balances one Postgres statement writes. */
  batchSize: number;
  /** Drain calls per organization per pass, so one busy organization cannot hold a pass forever. */
  maxBatches: number;
}

const defaultPersisterOptions: MeteredPersisterOptions = { everyMs: 250, batchSize: 500, maxBatches: 20 };

export interface PersistResult {
  organizations: number;
  /** Rows written to metered_usage (a drained balance an equal or newer revision already covered writes none). */
  persisted: number;
  thresholds: number;
  /** Credit rows whose spent changed, and rollover credits recorded (issue 35). */
  credits: number;
  /** Organizations whose write failed: their members were put back. */
  failed: number;
}

const thresholdEvent = (reached: ReachedThreshold) => ({
  type: 'usage.threshold_reached',
  data: {
    subscriber_id: reached.subscriberId,
    feature: reached.feature,
    threshold: reached.threshold,
    used: reached.used,
    limit: reached.limit,
    period_start: new Date(reached.periodStartMs).toISOString(),
  },
});

/**
 * The durable copy of metered usage (DESIGN.md §5, "Where usage lives"): takes each organization's dirty balances
 * out of Redis and upserts them into metered_usage, newer revisions only, detecting the thresholds they reached in
 * the same transaction. A write that fails puts its members back, so every change is persisted by some pass. Any
 * number of workers may run it at once: a member is handed to one drain only, and revisions order the writes.
 */
export function createMeteredPersister(
  deps: MeteredPersisterDeps,
  overrides: Partial<MeteredPersisterOptions> = {},
) {
  const options = { ...defaultPersisterOptions, ...overrides };
  const { db, redis, redisKeys: keys, clock, log } = deps;
  const governingDocs = createGoverningDocs(db);
  const recorded = createRecordedThresholds();

  /**
   * What governs each balance's thresholds. Read inside the write's transaction on a connection of its own (the
   * snapshot build opens its own REPEATABLE READ transaction): no persister waits for the drain lock while holding a
   * connection (pg_try_advisory_xact_lock), so one holding it always finds a second one.
   */
  async function limitsOf(
    organizationId: string,
    balances: readonly DrainedBalance[],
    nowMs: number,
  ): Promise<Map<string, number>> {
    const limits = new Map<string, number>();
    const used = balances.filter((balance) => balance.used > 0);
    if (used.length === 0) return limits;
    const { catalog, subscribers } = await governingDocs(
      organizationId,
      used.map((balance) => balance.subscriberId),
    );
    if (!catalog) return limits;
    for (const balance of used) {
      const subscriber = subscribers.get(balance.subscriberId);
      if (!subscriber) continue;
      const limit = governingLimit(catalog, subscriber, balance, nowMs);
      if (limit !== undefined && limit !== null) limits.set(balance.member, limit);
    }
    return limits;
  }

  /** Whether this worker has not seen a balance's threshold recorded yet. */
  const unrecorded = (organizationId: string, member: string) => (threshold: UsageThreshold) =>
    !recorded.has(organizationId, member, threshold);

  /** The thresholds a balance's figure reaches that this worker has not seen recorded yet. */
  const unrecordedThresholds = (organizationId: string, member: string, used: number, limit: number) =>
    thresholdsReached(used, limit).filter(unrecorded(organizationId, member));

  /**
   * Whether a balance's figure reaches a threshold of its limit not known to be recorded (the write then tells
   * whether it is new). A balance past its limit (every one spending credits) reaches 100 % at each change: once
   * recorded, it is written like any other.
   */
  const inReach = (organizationId: string, limits: Map<string, number>) => (balance: DrainedBalance) => {
    const limit = limits.get(balance.member);
    return (
      limit !== undefined &&
      thresholdsReached(balance.used, limit).some(unrecorded(organizationId, balance.member))
    );
  };

  const reachedBy = (
    organizationId: string,
    written: readonly DrainedBalance[],
    limits: Map<string, number>,
  ): ReachedThreshold[] =>
    written.flatMap(({ member, subscriberId, feature, periodStartMs, used }) => {
      const limit = limits.get(member);
      if (limit === undefined) return [];
      return unrecordedThresholds(organizationId, member, used, limit).map((threshold) => ({
        subscriberId,
        feature,
        periodStartMs,
        used,
        threshold,
        limit,
      }));
    });

  /**
   * One drain into Postgres: balances (used, covered, rollover), thresholds, credits' spent and rollover credits, and
   * their webhook deliveries, in one transaction. It takes the organization's drain lock before the drain and keeps
   * it to the commit, so drains of one organization (any number of workers) reach Postgres in the order they read
   * Redis: every commit leaves Postgres holding figures of one instant of Redis for what it drained, never an older
   * credit figure over a newer one (the credit-spent hash has no revision). Deadlocks are not retried (the drain is
   * not repeatable): a failed write puts its members back and the next pass drains them again. Answers null when
   * another persister holds the lock: it is draining the organization now, and the next pass takes what it leaves.
   */
  async function drainAndWrite(organizationId: string, result: PersistResult): Promise<Drained | null> {
    let popped: string[] = [];
    const nowMs = clock.now();
    try {
      const outcome = await db.transaction().execute(async (trx) => {
        // The drain's number for its credit figures comes with the lock: drains of the organization take the lock,
        // and so their numbers, in the order they then read Redis (`credit_spent_now` answers the latest).
        const { rows } = await sql<{ figure_seq: string | null }>`
          SELECT CASE WHEN pg_try_advisory_xact_lock(hashtext(${`metered-drain:${organizationId}`}))
            THEN nextval('credit_figure_seq') END AS figure_seq
        `.execute(trx);
        if (rows[0]?.figure_seq == null) return null;
        const figureSeq = Number(rows[0].figure_seq);
        const drained = await drainBalances(redis, keys, organizationId, options.batchSize);
        popped = drained.members;
        if (drained.taken === 0) return { drained, written: null, deliveryIds: [], attempted: [] };
        const limits = await limitsOf(organizationId, drained.balances, nowMs);
        const balances = await upsertBalances(
          trx,
          organizationId,
          drained.balances,
          inReach(organizationId, limits),
          figureSeq,
        );
        const attempted = reachedBy(organizationId, balances.written, limits);
        const reached = await recordReachedThresholds(trx, organizationId, attempted);
        const credits = await persistCreditHashes(
          trx,
          organizationId,
          drained.creditHashes,
          nowMs,
          figureSeq,
        );
        const events = [...reached.map(thresholdEvent), ...credits.events];
        const ids = await recordDeliveries(trx, organizationId, events, new Date(nowMs));
        return {
          drained,
          written: { persisted: balances.persisted, thresholds: reached.length, credits: credits.persisted },
          deliveryIds: ids,
          attempted,
        };
      });
      if (outcome === null) return null;
      const { drained, written, deliveryIds } = outcome;
      // Committed: every threshold attempted is in Postgres now, recorded by this write or an earlier one.
      for (const entry of outcome.attempted)
        recorded.add(
          organizationId,
          meteredMember(entry.subscriberId, entry.feature, entry.periodStartMs),
          entry.threshold,
        );
      if (written) {
        result.persisted += written.persisted;
        result.thresholds += written.thresholds;
        result.credits += written.credits;
      }
      // Committed: a delivery whose enqueue fails stays pending and the webhook sweep queues it.
      await enqueueDeliveries(deps.queues, deliveryIds).catch((error: unknown) =>
        log.warn(
          `metered usage: webhook deliveries not queued (${(error as Error).message}); the sweep will`,
        ),
      );
      return drained;
    } catch (error) {
      if (popped.length > 0) await markDirty(redis, keys, organizationId, popped).catch(() => undefined);
      throw error;
    }
  }

  /** Drains one organization's dirty set (up to maxBatches drains), then retires it when the set is empty. */
  async function persistOrganization(organizationId: string, result: PersistResult): Promise<void> {
    let clean = false;
    for (let batch = 0; batch < options.maxBatches; batch++) {
      const drained = await drainAndWrite(organizationId, result);
      if (drained === null) return;
      if (drained.taken === 0 || drained.remaining === 0) {
        clean = true;
        break;
      }
    }
    if (clean) await retireIfClean(redis, keys, organizationId);
  }

  /** One pass over every organization with dirty balances. */
  async function persistOnce(): Promise<PersistResult> {
    const result: PersistResult = { organizations: 0, persisted: 0, thresholds: 0, credits: 0, failed: 0 };
    const organizations = await redis.smembers(keys.meteredDirtyOrganizations);
    for (const organizationId of organizations) {
      result.organizations += 1;
      try {
        await persistOrganization(organizationId, result);
      } catch (error) {
        result.failed += 1;
        log.error(
          `metered usage of ${organizationId} not persisted, will retry: ${(error as Error).message}`,
        );
      }
    }
    return result;
  }

  return { persistOnce, options };
}

/**
 * The worker's persisting loop: one pass every `everyMs`, never overlapping itself. `persistNow` runs a pass at
 * once (or joins the one running).
 */
export function startMeteredPersister(
  deps: MeteredPersisterDeps,
  overrides: Partial<MeteredPersisterOptions> = {},
) {
  const persister = createMeteredPersister(deps, overrides);
  let running: Promise<PersistResult | null> | null = null;
  let stopped = false;

  const persistNow = (): Promise<PersistResult | null> => {
    if (stopped || deps.redis.status !== 'ready') return Promise.resolve(null);
    running ??= persister
      .persistOnce()
      .catch((error: unknown) => {
        deps.log.warn(`metered usage persister: ${(error as Error).message}`);
        return null;
      })
      .finally(() => {
        running = null;
      });
    return running;
  };

  const timer = setInterval(() => void persistNow(), persister.options.everyMs);
  timer.unref();

  return {
    persistNow,
    async stop(): Promise<void> {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
