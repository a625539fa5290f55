import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ErrorBodySchema } from '@ent/common/schemas/common';
import { withEvalPaths } from './openapi-evals.ts';

/** The OpenAPI 3.1 document is generated from the same route schemas that validate requests. */
export const openapi = fp(
  async function openapi(app: FastifyInstance) {
    app.addSchema(ErrorBodySchema);
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'Entitlement service',
          version: '1.0.0',
          description: 'Features, plans, subscribers, subscriptions, overrides, evals and the audit log.',
        },
        components: {
          securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' } },
        },
        security: [{ apiKey: [] }],
      },
      transformObject: withEvalPaths as never,
    });
    app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  },
  { name: 'openapi' },
);
