import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ErrorBodySchema } from '@ent/contract/common';
import { withEvalPaths } from './openapi-evals.ts';
import { withIdempotencyKeys } from './openapi-idempotency.ts';
import { withImportBody } from './openapi-imports.ts';
import { withCompleteResponses } from './openapi-responses.ts';

const API_REFERENCE_TITLE = 'Entitlement service API reference';

/** SPEC.md §7's error body (a component, registered below), for the answers no route schema declares. */
const errorBodyReference = { $ref: `#/components/schemas/${ErrorBodySchema.$id!}` };

/**
 * The OpenAPI 3.1 document is generated from the same route schemas that validate requests; `/docs` renders it.
 */
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
          securitySchemes: {
            apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
            // The console's session (docs/console-api.md); its writes also need the X-CSRF-Token header.
            consoleSession: { type: 'apiKey', in: 'cookie', name: 'ent_session' },
            // OFREP's own scheme (open-feature/protocol), on its two routes only.
            bearer: { type: 'http', scheme: 'bearer', description: 'The API key, on the OFREP routes' },
          },
        },
        // Either credential on the /org routes; X-API-Key wins when both are sent.
        security: [{ apiKey: [] }, { consoleSession: [] }],
      },
      transformObject: ((document: Parameters<typeof withIdempotencyKeys>[0]) =>
        withCompleteResponses(
          withEvalPaths({ openapiObject: withImportBody(withIdempotencyKeys(document) as never) as never }),
          errorBodyReference,
        )) as never,
      // Components named by their schema's $id (Feature, Plan, ErrorBody, ...), not def-0, def-1: a generated
      // client's type names come from them.
      refResolver: {
        buildLocalReference: (schema, _baseUri, _fragment, index) => {
          if (typeof schema.$id === 'string') {
            schema.title ??= schema.$id;
            return schema.$id;
          }
          return `def-${index}`;
        },
      },
    });
    app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
    // The API reference, rendered from the same document by Swagger UI (its assets ship in the package: no CDN).
    // It loads /openapi.json, the document the README names: the plugin's page always sets `url` to its own
    // copy (/docs/json), and Swagger UI reads `urls` instead of `url` when given.
    await app.register(swaggerUi, {
      routePrefix: '/docs',
      uiConfig: {
        docExpansion: 'list',
        deepLinking: true,
        defaultModelsExpandDepth: 0,
        urls: [{ url: '/openapi.json', name: API_REFERENCE_TITLE }],
      },
      theme: { title: API_REFERENCE_TITLE },
      staticCSP: true,
    });
  },
  { name: 'openapi' },
);
