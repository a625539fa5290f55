import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { getArrangement } from '@ent/common/metering/arrangement';
import { currentUsage } from '@ent/common/metering/usage';
import { commonErrorResponses } from '@ent/common/schemas/common';
import { UsageRecordSchema } from '@ent/common/schemas/usage';

const tags = ['usage'];

/** The arrangement from Postgres (the source of truth), the month's counters from Redis. */
export async function usageRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/org/usage/current',
    {
      config: { scope: 'subscribers:read' },
      schema: { tags, response: { 200: UsageRecordSchema, ...commonErrorResponses } },
    },
    async (request) => {
      const organizationId = request.principal!.organizationId;
      const arrangement = await getArrangement(app.db, organizationId);
      return currentUsage(app.redis, app.redisKeys, organizationId, arrangement, app.clock.now());
    },
  );
}
