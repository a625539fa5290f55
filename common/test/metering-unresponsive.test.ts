import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import { publishArrangement, SELF_SERVE_ARRANGEMENT } from '@ent/common/metering/arrangement';
import { EvalGateUnavailableError, type EvalMeter } from '../../gateway/src/metering/contract.ts';
import { createEvalMeter } from '../../gateway/src/metering/meter.ts';
import { currentUsage } from '@ent/common/metering/usage';
import { startOwnRedis, waitFor, type Started } from '../../gateway/test/processes.ts';

/**
 * A Redis that stops answering on a live connection (SIGSTOP: paused, swapped out, stuck) must cost one command
 * timeout, not one per eval: after the first call times out, the meter sends nothing until Redis answers a PING.
 */
describe('eval meter against a Redis that stops answering', () => {
  let server: Started;
  let redis: RedisClient;
  let observer: RedisClient;
  let meter: EvalMeter;
  const keys = redisKeys(`t${randomBytes(5).toString('hex')}`);
  const organizationId = `org_${randomBytes(6).toString('hex')}`;
  const arrangement = { ...SELF_SERVE_ARRANGEMENT, burstPerSecond: 10_000 };

  beforeAll(async () => {
    const own = await startOwnRedis();
    server = own.server;
    const config = {
      redisUrl: `redis://127.0.0.1:${own.port}`,
      redisClusterNodes: [],
      redisCommandTimeoutMs: 300,
    };
    redis = createRedis(config);
    observer = createRedis({ ...config, redisCommandTimeoutMs: 5000 });
    meter = createEvalMeter({ redis, keys, loadArrangement: async () => arrangement });
    await publishArrangement(redis, keys, organizationId, arrangement);
  }, 60_000);

  afterAll(async () => {
    if (server?.child.pid) process.kill(server.child.pid, 'SIGCONT');
    redis?.disconnect();
    observer?.disconnect();
    await server?.stop();
  });

  const gate = () => meter.gate({ organizationId, subscriberId: 'cus_1', nowMs: Date.now() });
  /** One gate call: true when it was answered; a failed one reports its eval as not answered 2xx. */
  const sent = () =>
    gate().then(
      () => true,
      (error: EvalGateUnavailableError) => {
        error.report(false);
        return false;
      },
    );
  const gateCalls = async () => {
    const stats = await observer.info('commandstats');
    return Number(/^cmdstat_evalsha:calls=(\d+)/m.exec(stats)?.[1] ?? 0);
  };

  it('sends one call to the hung server, fails the rest at once, and counts every 2xx once it answers', async () => {
    expect((await gate()).outcome).toBe('counted');
    await observer.config('RESETSTAT');
    const pid = server.child.pid!;
    process.kill(pid, 'SIGSTOP');
    let failed = 0;
    try {
      for (let i = 0; i < 5; i++) {
        const error = await gate().then(
          () => null,
          (reason: unknown) => reason,
        );
        expect(error).toBeInstanceOf(EvalGateUnavailableError);
        (error as EvalGateUnavailableError).report(true); // each answered 2xx from memory (fail open)
        failed++;
      }
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(failed).toBe(5);
    // The first call reached the paused server (it runs on resume); the four after it were never sent.
    await waitFor(async () => (await gateCalls()) >= 1, 'the paused call run on resume', 5000);
    expect(await gateCalls()).toBe(1);

    let countedSince = 0;
    await waitFor(
      async () =>
        gate().then(
          () => {
            countedSince++;
            return true;
          },
          (error: EvalGateUnavailableError) => {
            error.report(false); // answered 503 from memory
            return false;
          },
        ),
      'the meter sending again',
      10_000,
    );
    await waitFor(async () => {
      await meter.settlePending();
      return meter.pendingSettlements() === 0;
    }, 'every failed call settled');
    const usage = await currentUsage(redis, keys, organizationId, arrangement, Date.now());
    expect(usage.count).toBe(1 + 5 + countedSince);
  }, 60_000);

  it('holds the breaker open through CLIENT PAUSE WRITE, which answers PING but holds every script', async () => {
    await waitFor(sent, 'the meter sending', 10_000);
    await observer.config('RESETSTAT');
    await observer.call('CLIENT', 'PAUSE', '1500', 'WRITE');
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) {
      outcomes.push(
        await gate().then(
          (result) => result.outcome,
          (error: EvalGateUnavailableError) => {
            error.report(true);
            return 'unavailable';
          },
        ),
      );
    }
    expect(outcomes).toEqual(Array(5).fill('unavailable'));
    // Only the first was sent; the paused server runs it when the pause ends.
    await waitFor(async () => (await gateCalls()) >= 1, 'the paused call run after the pause', 5000);
    expect(await gateCalls()).toBe(1);
    await waitFor(sent, 'the meter sending again', 10_000);
  }, 60_000);
});
