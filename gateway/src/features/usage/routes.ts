import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { serviceUnavailable } from '@ent/common/errors/app-error';
import { readPublishedArrangement, type Arrangement } from '@ent/common/metering/arrangement';
import { readUsageCounters, usageRecord } from '@ent/common/metering/usage';
import { commonErrorResponses } from '@ent/contract/common';
import { UsageRecordSchema } from '@ent/contract/usage';
import { xApiKeyOf } from '../shared/api-key-header.ts';

/**
 * `GET /org/usage/current` on the gateway (DESIGN.md §1), from Redis alone: the month's counters and the
 * arrangement every gate call reads, so the record agrees with the eval headers and keeps answering while admin is
 * down. The key is confirmed against the organization's auth version as an eval's gate call confirms it.
 */
export async function usageRoute(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { evaluator, redis, redisKeys: keys, clock, adminClient } = app;
  const authenticate = evaluator.authentication(xApiKeyOf, 'subscribers:read');

  async function arrangementFromAdmin(request: FastifyRequest, organizationId: string): Promise<Arrangement> {
    try {
      return (await adminClient.organization(organizationId)).arrangement;
    } catch (error) {
      request.log.warn({ err: error }, 'usage: no arrangement in Redis and admin unreachable');
      throw serviceUnavailable('Usage cannot be read right now; retry shortly.');
    }
  }

  app.get(
    '/org/usage/current',
    {
      config: { scope: 'subscribers:read' },
      onRequest: authenticate,
      schema: { response: { 200: UsageRecordSchema, ...commonErrorResponses } },
    },
    async (request) => {
      const organizationId = request.knownKey!.principal!.organizationId;
      const nowMs = clock.now();
      let read;
      try {
        read = await Promise.all([
          readPublishedArrangement(redis, keys, organizationId),
          readUsageCounters(redis, keys, organizationId, nowMs),
          redis.hget(keys.auth(organizationId), 'v'),
        ]);
      } catch (error) {
        request.log.warn({ err: error }, 'usage: Redis unreachable');
        throw serviceUnavailable('Usage cannot be read right now; retry shortly.');
      }
      const [published, counters, authVersion] = read;
      await evaluator.confirmKey(request, Number(authVersion ?? 0), nowMs, 'subscribers:read');
      // Redis without the arrangement (new organization, flushed Redis): admin republishes it, as for a gate call.
      const arrangement = published ?? (await arrangementFromAdmin(request, organizationId));
      return usageRecord(arrangement, counters, nowMs);
    },
  );
}
