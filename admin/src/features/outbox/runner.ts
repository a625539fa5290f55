import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';
import { createSnapshotPublisher } from '../snapshots/publisher.ts';
import { createReconciler, type ReconcileReport } from './reconciler.ts';
import { createOutboxRelay, type DrainResult, type OutboxRelayOptions } from './relay.ts';
import { makeAllDue } from './store.ts';

export interface OutboxRunnerDeps {
  db: Kysely<Database>;
  redis: RedisClient;
  redisKeys: RedisKeys;
  log: { info(message: string): void; warn(message: string): void };
}

export interface OutboxRunnerOptions {
  relayEveryMs: number;
  reconcileEveryMs: number;
  /** Every this many routine reconciliations, one checks every subscriber. */
  fullReconcileEvery: number;
  pruneEveryMs: number;
  relay?: Partial<OutboxRelayOptions>;
}

const defaultRunnerOptions: OutboxRunnerOptions = {
  relayEveryMs: 500,
  reconcileEveryMs: 30_000,
  fullReconcileEvery: 120,
  pruneEveryMs: 60_000,
};

/**
 * The worker's outbox duties, each on its own timer and never overlapping itself: the relay drains undone
 * entries; the reconciler repairs what Redis lost; done entries are pruned. When the Redis connection becomes
 * ready again (restart, failover, partition healed) every undone entry is due at once and a full
 * reconciliation runs, whatever the Redis that came back holds.
 */
export function startOutboxRunner(deps: OutboxRunnerDeps, overrides: Partial<OutboxRunnerOptions> = {}) {
  const options = { ...defaultRunnerOptions, ...overrides };
  const { db, redis, log } = deps;
  const publisher = createSnapshotPublisher({ db, redis, redisKeys: deps.redisKeys });
  const relay = createOutboxRelay({ db, publisher }, options.relay);
  const reconciler = createReconciler({ db, redis, redisKeys: deps.redisKeys, publisher });
  const timers: NodeJS.Timeout[] = [];
  let stopped = false;
  let draining: Promise<DrainResult | null> | null = null;
  let reconciling: Promise<ReconcileReport | null> | null = null;
  let routineRuns = 0;

  const redisReady = () => redis.status === 'ready';

  const drain = (): Promise<DrainResult | null> => {
    if (stopped || !redisReady()) return Promise.resolve(null);
    draining ??= relay
      .drainOnce()
      .then((result) => {
        if (result.failed > 0)
          log.warn(`outbox relay: ${result.failed} entries failed, will retry with backoff`);
        return result;
      })
      .catch((error: unknown) => {
        log.warn(`outbox relay: ${(error as Error).message}`);
        return null;
      })
      .finally(() => {
        draining = null;
      });
    return draining;
  };

  const reconcile = (full: boolean): Promise<ReconcileReport | null> => {
    if (stopped || !redisReady()) return Promise.resolve(null);
    reconciling ??= reconciler
      .reconcileOnce({ full })
      .then((report) => {
        const repaired = Object.values(report.repaired).reduce((sum, n) => sum + n, 0);
        if (report.rebuilt || repaired || report.failed) {
          log.info(
            `reconciler: ${report.rebuilt} organizations rebuilt, ${repaired} documents repaired, ${report.failed} failed`,
          );
        }
        return report;
      })
      .catch((error: unknown) => {
        log.warn(`reconciler: ${(error as Error).message}`);
        return null;
      })
      .finally(() => {
        reconciling = null;
      });
    return reconciling;
  };

  const every = (ms: number, run: () => unknown) => {
    const timer = setInterval(run, ms);
    timer.unref();
    timers.push(timer);
  };
  every(options.relayEveryMs, drain);
  every(options.reconcileEveryMs, () => {
    routineRuns += 1;
    void reconcile(routineRuns % options.fullReconcileEvery === 0);
  });
  every(options.pruneEveryMs, () => {
    relay.prune().catch((error: unknown) => log.warn(`outbox prune: ${(error as Error).message}`));
  });

  const onRedisReady = () => {
    void (async () => {
      await makeAllDue(db).catch(() => undefined);
      await drain();
      await reconcile(true);
    })();
  };
  redis.on('ready', onRedisReady);
  if (redisReady()) onRedisReady();

  return {
    drain,
    reconcile,
    async stop(): Promise<void> {
      stopped = true;
      for (const timer of timers) clearInterval(timer);
      redis.off('ready', onRedisReady);
      await Promise.all([draining, reconciling]);
    },
  };
}
