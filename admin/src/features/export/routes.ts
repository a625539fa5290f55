import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { commonErrorResponses } from '@ent/contract/common';
import { EXPORT_CONTENT_TYPE, ExportLineSchema } from '@ent/contract/exports';
import { exportOrganization } from './service.ts';

async function* nonEmpty(chunks: AsyncIterable<string>): AsyncGenerator<string> {
  for await (const chunk of chunks) if (chunk !== '') yield chunk;
}

export async function exportRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/org/export',
    {
      config: { scope: 'catalog:read', alsoScopes: ['subscribers:read'] },
      schema: {
        tags: ['export'],
        description:
          'The whole organization as NDJSON, one record a line, in dependency order (features, plans, subscribers, ' +
          'subscriptions, overrides, credits), from one consistent snapshot: what `POST /org/imports` takes back. Needs ' +
          '`catalog:read` and `subscribers:read`. A response that ends without its last newline was cut short.',
        response: {
          200: {
            description: 'one ExportLine a line',
            content: { [EXPORT_CONTENT_TYPE]: { schema: ExportLineSchema } },
          },
          ...commonErrorResponses,
        },
      },
    },
    async (request, reply) => {
      const chunks = exportOrganization(
        { db: app.db, redis: app.redis, redisKeys: app.redisKeys },
        request.principal!.organizationId,
      );
      // The typed reply knows the lines' schema, not that a stream of them is sent.
      const untyped: FastifyReply = reply;
      return untyped.type(EXPORT_CONTENT_TYPE).send(Readable.from(nonEmpty(chunks), { objectMode: false }));
    },
  );
}
