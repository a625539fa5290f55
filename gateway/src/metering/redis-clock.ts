import { performance } from 'node:perf_hooks';
import type { RedisClient } from '@ent/common/redis/connect';

/** One reading of Redis `TIME`, between the local instants its command was sent and its reply read. */
export interface ClockSample {
  sentAt: number;
  receivedAt: number;
  /** Redis's clock, ms since the epoch. */
  redisMs: number;
}

/** Redis's clock minus the local clock, give or take `uncertaintyMs` (half the round trip it was read in). */
export interface ClockOffset {
  offsetMs: number;
  uncertaintyMs: number;
}

/**
 * The offset from the sample of the shortest round trip: Redis read its clock somewhere inside that trip, so the
 * trip's midpoint is off by at most half of it. Undefined without samples.
 */
export function offsetOf(samples: readonly ClockSample[]): ClockOffset | undefined {
  let best: ClockSample | undefined;
  for (const sample of samples) {
    if (best === undefined || sample.receivedAt - sample.sentAt < best.receivedAt - best.sentAt)
      best = sample;
  }
  if (best === undefined) return undefined;
  const roundTrip = best.receivedAt - best.sentAt;
  return { offsetMs: best.redisMs - (best.sentAt + roundTrip / 2), uncertaintyMs: roundTrip / 2 };
}

/**
 * How long after it is sent a metered script call may still apply: half the command timeout after which the
 * gateway answers 503. The other half is the margin for the reply's way back (decisions.md, "A metered call that
 * reaches Redis late applies nothing").
 */
export const deadlineBudgetMs = (commandTimeoutMs: number) => Math.floor(commandTimeoutMs / 2);
const DEFAULT_COMMAND_TIMEOUT_MS = 1000;

const SAMPLES = 5;
/** A measurement older than this is taken again, in the background, when a deadline is asked for. */
const REFRESH_MS = 15_000;

export interface RedisClockOptions {
  /** Ms a call may take from its sending to its start in Redis (deadlineBudgetMs). */
  budgetMs?: number;
  /** The local clock: monotonic, so a step of the system clock between measurements moves no deadline. */
  now?: () => number;
  samples?: number;
  refreshMs?: number;
}

export interface RedisClock {
  /**
   * The latest instant on Redis's clock (ms, as its `TIME`) at which a script call sent now may still apply
   * anything: a promise only while no measurement has succeeded yet (it measures first).
   */
  deadline(): number | Promise<number>;
  /** Reads Redis `TIME` a few times, one after another, and keeps the offset of the quickest reading. */
  measure(): Promise<ClockOffset>;
}

/** Redis's clock as this gateway knows it, for the deadline every metered script call carries as its last argument. */
export function createRedisClock(
  redis: Pick<RedisClient, 'time'>,
  {
    budgetMs = deadlineBudgetMs(DEFAULT_COMMAND_TIMEOUT_MS),
    now = () => performance.now(),
    samples = SAMPLES,
    refreshMs = REFRESH_MS,
  }: RedisClockOptions = {},
): RedisClock {
  let offset: ClockOffset | undefined;
  let measuredAt = 0;
  let measuring: Promise<ClockOffset> | null = null;

  async function sampleAll(): Promise<ClockOffset> {
    const taken: ClockSample[] = [];
    for (let i = 0; i < samples; i++) {
      const sentAt = now();
      const [seconds, microseconds] = await redis.time();
      const receivedAt = now();
      taken.push({ sentAt, receivedAt, redisMs: Number(seconds) * 1000 + Number(microseconds) / 1000 });
    }
    const measured = offsetOf(taken)!;
    offset = measured;
    measuredAt = now();
    return measured;
  }

  const measure = (): Promise<ClockOffset> => {
    measuring ??= sampleAll().finally(() => {
      measuring = null;
    });
    return measuring;
  };

  // The uncertainty is taken off, so the deadline is never later on Redis's clock than the budget allows.
  const deadlineFrom = (known: ClockOffset, sentAt: number) =>
    Math.floor(sentAt + known.offsetMs + budgetMs - known.uncertaintyMs);

  return {
    deadline() {
      const sentAt = now();
      if (offset === undefined) return measure().then((known) => deadlineFrom(known, now()));
      // A failed refresh keeps the last offset: two clocks drift apart by a few milliseconds a minute at most.
      if (sentAt - measuredAt > refreshMs && measuring === null) measure().catch(() => undefined);
      return deadlineFrom(offset, sentAt);
    },
    measure,
  };
}
