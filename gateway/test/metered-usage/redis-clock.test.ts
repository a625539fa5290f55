import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@ent/common/config';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import {
  createRedisClock,
  deadlineBudgetMs,
  offsetOf,
  type ClockSample,
} from '../../src/metering/redis-clock.ts';

describe('the offset from Redis TIME samples (pure)', () => {
  it('keeps the sample of the shortest round trip: its midpoint, give or take half of it', () => {
    const samples: ClockSample[] = [
      { sentAt: 1000, receivedAt: 1040, redisMs: 6000 },
      { sentAt: 2000, receivedAt: 2004, redisMs: 7010 },
      { sentAt: 3000, receivedAt: 3010, redisMs: 7990 },
    ];
    expect(offsetOf(samples)).toEqual({ offsetMs: 5008, uncertaintyMs: 2 });
  });

  it('keeps the first of equally quick samples, and has no offset without samples', () => {
    expect(
      offsetOf([
        { sentAt: 0, receivedAt: 2, redisMs: -10 },
        { sentAt: 10, receivedAt: 12, redisMs: 100 },
      ]),
    ).toEqual({ offsetMs: -11, uncertaintyMs: 1 });
    expect(offsetOf([])).toBeUndefined();
  });

  it('gives a call half the command timeout', () => {
    expect(deadlineBudgetMs(1000)).toBe(500);
    expect(deadlineBudgetMs(301)).toBe(150);
  });
});

/** A Redis whose TIME reads `redisNow()` after `delay` ms of local time; `failing` makes it throw. */
function fakeRedis(local: { now: number }, redisNow: () => number) {
  const fake = {
    calls: 0,
    delay: 4,
    failing: false,
    time: async () => {
      fake.calls += 1;
      if (fake.failing) throw new Error('Command timed out');
      local.now += fake.delay / 2;
      const ms = redisNow();
      local.now += fake.delay / 2;
      return [String(Math.floor(ms / 1000)), String(Math.round((ms % 1000) * 1000))];
    },
  };
  return fake;
}

describe('the Redis clock (deadlines)', () => {
  it('measures before its first deadline, then answers at once: send time + offset + budget - uncertainty', async () => {
    const local = { now: 50_000 };
    const redis = fakeRedis(local, () => local.now + 1_000_000);
    const clock = createRedisClock(redis as unknown as Pick<RedisClient, 'time'>, {
      budgetMs: 500,
      now: () => local.now,
    });
    const first = clock.deadline();
    expect(first).toBeInstanceOf(Promise);
    // Five samples of 4 ms: offset 1,000,000, uncertainty 2; the deadline is taken after them.
    expect(await first).toBe(50_020 + 1_000_000 + 500 - 2);
    expect(redis.calls).toBe(5);
    local.now = 60_000;
    expect(clock.deadline()).toBe(60_000 + 1_000_000 + 498);
    expect(redis.calls).toBe(5);
  });

  it('measures again in the background once its measurement is old, keeping the last offset if that fails', async () => {
    const local = { now: 0 };
    let skew = 300;
    const redis = fakeRedis(local, () => local.now + skew);
    const clock = createRedisClock(redis as unknown as Pick<RedisClient, 'time'>, {
      budgetMs: 100,
      now: () => local.now,
      samples: 2,
      refreshMs: 10_000,
    });
    await clock.measure();
    skew = 700;
    redis.failing = true;
    local.now = 20_000;
    // Old: this deadline still uses the last offset, and a measurement starts (and fails).
    expect(clock.deadline()).toBe(20_000 + 300 + 100 - 2);
    await expect(clock.measure()).rejects.toThrow('Command timed out');
    expect(clock.deadline()).toBe(20_000 + 398);
    await clock.measure().catch(() => undefined);
    redis.failing = false;
    redis.delay = 2;
    await clock.measure();
    expect(clock.deadline()).toBe(local.now + 700 + 100 - 1);
  });

  describe('against the real Redis', () => {
    let redis: RedisClient;
    beforeAll(() => {
      redis = createRedis(loadConfig());
    });
    afterAll(() => redis.disconnect());

    it('finds an offset near 0 to the local wall clock (same machine), within its uncertainty', async () => {
      const clock = createRedisClock(redis, { budgetMs: 500, now: () => Date.now() });
      const { offsetMs, uncertaintyMs } = await clock.measure();
      expect(uncertaintyMs).toBeGreaterThanOrEqual(0);
      // Date.now() counts whole milliseconds: the midpoint of a reading is off by up to 1 ms more.
      expect(Math.abs(offsetMs)).toBeLessThanOrEqual(uncertaintyMs + 1);
      const before = Date.now();
      const deadline = clock.deadline() as number;
      expect(deadline).toBeLessThanOrEqual(before + 500 + 1);
      expect(deadline).toBeGreaterThanOrEqual(before + 500 - 2 * uncertaintyMs - 2);
    });
  });
});
