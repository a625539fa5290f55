import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { notFound } from '@ent/common/errors/app-error';
import { getArrangement } from '@ent/common/metering/arrangement';
import {
  buildApiKey,
  buildCatalog,
  buildOrganizationApiKeys,
  buildSubscribers,
} from '@ent/common/snapshots/build';
import { MISSING_SUBSCRIBER } from '@ent/common/snapshots/documents';
import type { SnapshotPublisher } from './publisher.ts';
import { hasNulCharacter } from '../shared/nul-characters.ts';

const ApiKeyBody = Type.Object(
  { key_hash: Type.String({ pattern: '^[0-9a-f]{64}$' }) },
  { additionalProperties: false },
);
const SubscriberBody = Type.Object(
  {
    organization_id: Type.String({ minLength: 1 }),
    subscriber_id: Type.String({ minLength: 1, maxLength: 255 }),
  },
  { additionalProperties: false },
);
const OrganizationBody = Type.Object(
  { organization_id: Type.String({ minLength: 1 }) },
  { additionalProperties: false },
);

/**
 * Publishes through Redis; when that fails (Redis unreachable), the same documents straight from Postgres:
 * still correct, and what a gateway re-checking a key while Redis is down needs (a revocation must win).
 */
async function publishedOrBuilt<T>(
  request: FastifyRequest,
  publish: () => Promise<T>,
  build: () => Promise<T>,
): Promise<T> {
  // Not connected: a write would only wait out reconnection attempts while the gateway waits for its answer.
  if (request.server.redis.status !== 'ready') return build();
  try {
    return await publish();
  } catch (error) {
    const built = await build();
    request.log.warn({ err: error }, 'snapshot answered from Postgres; its Redis write failed');
    return built;
  }
}

/**
 * Rebuild-on-demand for gateways that miss in Redis (flushed, or a new Redis). Outside /org: gateways never
 * forward these from the public port. Each rebuilds from Postgres, writes Redis, and returns the document
 * so the gateway can answer without a second round trip (from Postgres alone when Redis cannot be written).
 */
export async function internalSnapshotRoutes(
  fastify: FastifyInstance,
  options: { publisher: SnapshotPublisher },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { publisher } = options;
  const { db } = fastify;

  app.post('/internal/snapshots/api-key', { schema: { hide: true, body: ApiKeyBody } }, async (request) => {
    const keyHash = request.body.key_hash;
    const snapshot = await publishedOrBuilt(
      request,
      () => publisher.publishApiKey(keyHash),
      () => buildApiKey(db, keyHash),
    );
    if (!snapshot) throw notFound('No such API key.');
    return { organization_id: snapshot.organizationId, version: snapshot.authVersion, doc: snapshot.doc };
  });

  app.post(
    '/internal/snapshots/subscriber',
    { schema: { hide: true, body: SubscriberBody } },
    async (request) => {
      const { organization_id: organizationId, subscriber_id: subscriberId } = request.body;
      // No stored subscriber id holds U+0000 (Postgres refuses it): unknown, not a database error.
      if (hasNulCharacter(subscriberId)) return { version: 0, doc: MISSING_SUBSCRIBER };
      const built = await publishedOrBuilt(
        request,
        () => publisher.publishSubscribers(organizationId, [subscriberId], { announce: false }),
        () => buildSubscribers(db, organizationId, [subscriberId]),
      );
      const snapshot = built.get(subscriberId);
      return snapshot ?? { version: 0, doc: MISSING_SUBSCRIBER };
    },
  );

  app.post(
    '/internal/snapshots/organization',
    { schema: { hide: true, body: OrganizationBody } },
    async (request) => {
      const organizationId = request.body.organization_id;
      const published = await publishedOrBuilt(
        request,
        () => publisher.publishOrganization(organizationId),
        async () => {
          const catalog = await buildCatalog(db, organizationId);
          if (!catalog) return null;
          const [auth, arrangement] = await Promise.all([
            buildOrganizationApiKeys(db, organizationId),
            getArrangement(db, organizationId),
          ]);
          return { catalog, authVersion: auth?.authVersion ?? 0, arrangement };
        },
      );
      if (!published) throw notFound('No such organization.');
      return {
        catalog: published.catalog,
        auth_version: published.authVersion,
        arrangement: published.arrangement,
      };
    },
  );
}
