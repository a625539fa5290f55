import type { FastifyInstance } from 'fastify';
import { AppError, validationError } from '@ent/common/errors/app-error';
import { DEFAULT_USAGE_EVENTS_PER_SECOND } from '@ent/common/metering/arrangement';
import { meteredUnavailable } from '../../metering/metered-balances.ts';
import { withMeteringCommands } from '../../metering/scripts.ts';

const usageRateLimited = (retryAfterSeconds: number) =>
  new AppError(429, 'RATE_LIMITED', 'Too many usage events for this organization; retry later.', undefined, {
    'retry-after': String(retryAfterSeconds),
  });

/** A request of more events than the rate: no second can take it, so waiting (a 429) would never end. */
const moreThanTheRate = (events: number, rate: number) =>
  validationError(
    `This request holds ${events} usage events, more than the organization takes in a second (${rate}); send at most ${rate} a request.`,
    { field: 'events', value: events, expected: `at most ${rate} events a request` },
  );

/**
 * Takes `events` from the organization's usage-event rate (its arrangement's `usage_events_per_second`), whole or
 * not at all: 429 with Retry-After over it, 422 when `events` alone is over it, 503 when Redis does not answer
 * (nothing is accepted then).
 */
export async function takeUsageEvents(
  app: Pick<FastifyInstance, 'redis' | 'redisKeys'>,
  organizationId: string,
  events: number,
  nowMs: number,
): Promise<void> {
  let waitMs: number;
  try {
    waitMs = await withMeteringCommands(app.redis).usageRate(
      app.redisKeys.arrangement(organizationId),
      app.redisKeys.usageEventsWindow(organizationId),
      nowMs,
      events,
      DEFAULT_USAGE_EVENTS_PER_SECOND,
    );
  } catch (error) {
    throw Object.assign(meteredUnavailable(), { cause: error });
  }
  if (waitMs < 0) throw moreThanTheRate(events, -waitMs);
  if (waitMs > 0) throw usageRateLimited(Math.max(1, Math.ceil(waitMs / 1000)));
}
