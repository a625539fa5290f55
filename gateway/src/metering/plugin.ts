import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { EvalMeter } from './contract.ts';
import { createEvalMeter } from './meter.ts';
import { createMeteredBalances, type MeteredBalances } from './metered-balances.ts';
import { createRedisClock, deadlineBudgetMs } from './redis-clock.ts';

declare module 'fastify' {
  interface FastifyInstance {
    evalMeter: EvalMeter;
    /** Metered balances outside the gate call: reports, reads, redone consumes and refills (DESIGN.md §5). */
    meteredBalances: MeteredBalances;
  }
}

const SETTLE_EVERY_MS = 1000;
/**
 * What shutdown waits for the last settlements: one command timeout and a little. What Redis has not taken
 * by then is lost with the process (logged with its size).
 */
const SHUTDOWN_SETTLE_MS = 1500;

/**
 * The one gate call per eval (metering, burst, block and snapshot versions), and the settlements of gate
 * calls that did not answer and refunds Redis did not take, applied once each when Redis is back.
 */
export const meter = fp<{ meter?: EvalMeter }>(
  async function meter(app: FastifyInstance, options) {
    // One clock for every metered call's deadline, measured before the gateway listens (while Redis answers).
    const redisClock = createRedisClock(app.redis, {
      budgetMs: deadlineBudgetMs(app.config.redisCommandTimeoutMs),
    });
    try {
      await redisClock.measure();
    } catch (error) {
      app.log.warn({ err: error }, 'Redis clock not measured: measured again when Redis is ready');
    }
    const measureAgain = () => void redisClock.measure().catch(() => undefined);
    app.redis.on('ready', measureAgain);
    app.addHook('onClose', async () => {
      app.redis.off('ready', measureAgain);
    });
    const evalMeter =
      options.meter ??
      createEvalMeter({
        redis: app.redis,
        keys: app.redisKeys,
        redisClock,
        loadArrangement: async (organizationId) => {
          app.gatewayMetrics.snapshotRebuilds.inc({ kind: 'organization' });
          return (await app.adminClient.organization(organizationId)).arrangement;
        },
      });

    const settle = async () => {
      try {
        await evalMeter.settlePending();
      } catch (error) {
        app.gatewayMetrics.redisErrors.inc({ op: 'settle' });
        app.log.warn(
          { err: error, pending: evalMeter.pendingSettlements() },
          'eval settlements wait for Redis',
        );
      }
      app.gatewayMetrics.offlineEvals.set(evalMeter.pendingSettlements());
    };

    const timer = setInterval(() => void settle(), SETTLE_EVERY_MS);
    timer.unref();
    app.redis.on('ready', () => void settle());
    app.decorate('evalMeter', evalMeter);
    app.decorate(
      'meteredBalances',
      createMeteredBalances({
        redis: app.redis,
        keys: app.redisKeys,
        clock: app.clock,
        redisClock,
        refillGatherMs: app.config.meteredRefillGatherMs,
        loadBalances: (organizationId) => app.adminClient.meteredBalances(organizationId),
        settlements: evalMeter,
      }),
    );
    app.addHook('onClose', async () => {
      clearInterval(timer);
      let deadline: NodeJS.Timeout | undefined;
      await Promise.race([
        settle(),
        new Promise<void>((resolve) => {
          deadline = setTimeout(resolve, SHUTDOWN_SETTLE_MS);
        }),
      ]);
      clearTimeout(deadline);
      const left = evalMeter.pendingSettlements();
      if (left > 0) app.log.error({ pending: left }, 'eval settlements not applied before shutdown');
    });
  },
  { name: 'meter', dependencies: ['infrastructure', 'admin-client', 'gateway-metrics'] },
);
