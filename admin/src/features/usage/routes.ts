import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { commonErrorResponses } from '@ent/common/schemas/common';
import { UsageRecordSchema } from '@ent/common/schemas/usage';
import { usageOf } from './service.ts';

const tags = ['usage'];

export async function usageRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/org/usage/current',
    {
      config: { scope: 'subscribers:read' },
      schema: { tags, response: { 200: UsageRecordSchema, ...commonErrorResponses } },
    },
    async (request) => usageOf(app, request.principal!.organizationId, app.clock.now()),
  );
}
