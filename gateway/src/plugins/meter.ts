import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { EvalMeter } from '@ent/common/metering/contract';
import { createEvalMeter } from '@ent/common/metering/meter';

export interface OfflineCounter {
  /** One eval answered from the LRU while Redis was unreachable (fail-open). */
  add(organizationId: string): void;
  /** Hands the counts to Redis; what cannot be added stays for the next attempt. */
  flush(): Promise<void>;
  pending(): number;
}

declare module 'fastify' {
  interface FastifyInstance {
    evalMeter: EvalMeter;
    offlineEvals: OfflineCounter;
  }
}

const FLUSH_EVERY_MS = 1000;

/**
 * The one gate call per eval (metering, burst, block and snapshot versions) and the local count of evals
 * answered while Redis was down, added to Redis once it is back.
 */
export const meter = fp<{ meter?: EvalMeter }>(
  async function meter(app: FastifyInstance, options) {
    const evalMeter =
      options.meter ??
      createEvalMeter({
        redis: app.redis,
        keys: app.redisKeys,
        loadArrangement: async (organizationId) => {
          app.gatewayMetrics.snapshotRebuilds.inc({ kind: 'organization' });
          return (await app.adminClient.organization(organizationId)).arrangement;
        },
      });

    const counts = new Map<string, number>();
    let total = 0;
    let flushing: Promise<void> | null = null;
    const offline: OfflineCounter = {
      add(organizationId) {
        counts.set(organizationId, (counts.get(organizationId) ?? 0) + 1);
        total += 1;
        app.gatewayMetrics.offlineEvals.set(total);
      },
      flush() {
        if (total === 0 || app.redis.status !== 'ready') return Promise.resolve();
        flushing ??= (async () => {
          for (const [organizationId, count] of [...counts]) {
            try {
              await evalMeter.addOfflineCount(organizationId, count, app.clock.now());
            } catch {
              app.gatewayMetrics.redisErrors.inc({ op: 'offline_count' });
              return;
            }
            const left = (counts.get(organizationId) ?? 0) - count;
            if (left > 0) counts.set(organizationId, left);
            else counts.delete(organizationId);
            total -= count;
            app.gatewayMetrics.offlineEvals.set(total);
          }
        })().finally(() => {
          flushing = null;
        });
        return flushing;
      },
      pending: () => total,
    };

    const timer = setInterval(() => void offline.flush(), FLUSH_EVERY_MS);
    timer.unref();
    app.redis.on('ready', () => void offline.flush());
    app.decorate('evalMeter', evalMeter);
    app.decorate('offlineEvals', offline);
    app.addHook('onClose', async () => {
      clearInterval(timer);
      await offline.flush();
    });
  },
  { name: 'meter', dependencies: ['infrastructure', 'admin-client', 'metrics'] },
);
