import type { FastifyInstance } from 'fastify';
import { getArrangement } from '@ent/common/metering/arrangement';
import { currentUsage, type UsageRecord } from '@ent/common/metering/usage';

/** The month's usage: the arrangement from Postgres (the source of truth), the counters from Redis. */
export async function usageOf(
  deps: Pick<FastifyInstance, 'db' | 'redis' | 'redisKeys'>,
  organizationId: string,
  nowMs: number,
): Promise<UsageRecord> {
  const arrangement = await getArrangement(deps.db, organizationId);
  return currentUsage(deps.redis, deps.redisKeys, organizationId, arrangement, nowMs);
}
