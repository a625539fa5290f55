import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { notFound } from '@ent/common/errors/app-error';
import { MISSING_SUBSCRIBER } from '@ent/common/snapshots/documents';
import type { SnapshotPublisher } from './publisher.ts';
import { hasNulCharacter } from '../shared/nul-characters.ts';

const ApiKeyBody = Type.Object({ key_hash: Type.String({ pattern: '^[0-9a-f]{64}$' }) }, { additionalProperties: false });
const SubscriberBody = Type.Object(
  { organization_id: Type.String({ minLength: 1 }), subscriber_id: Type.String({ minLength: 1, maxLength: 255 }) },
  { additionalProperties: false },
);
const OrganizationBody = Type.Object({ organization_id: Type.String({ minLength: 1 }) }, { additionalProperties: false });

/**
 * Rebuild-on-demand for gateways that miss in Redis (flushed, or a new Redis). Outside /org: gateways never
 * forward these from the public port. Each rebuilds from Postgres, writes Redis, and returns the document
 * so the gateway can answer without a second round trip.
 */
export async function internalSnapshotRoutes(
  fastify: FastifyInstance,
  options: { publisher: SnapshotPublisher },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { publisher } = options;

  app.post('/internal/snapshots/api-key', { schema: { hide: true, body: ApiKeyBody } }, async (request) => {
    const snapshot = await publisher.publishApiKey(request.body.key_hash);
    if (!snapshot) throw notFound('No such API key.');
    return { organization_id: snapshot.organizationId, version: snapshot.authVersion, doc: snapshot.doc };
  });

  app.post('/internal/snapshots/subscriber', { schema: { hide: true, body: SubscriberBody } }, async (request) => {
    const { organization_id: organizationId, subscriber_id: subscriberId } = request.body;
    // No stored subscriber id holds U+0000 (Postgres refuses it): unknown, not a database error.
    if (hasNulCharacter(subscriberId)) return { version: 0, doc: MISSING_SUBSCRIBER };
    const built = await publisher.publishSubscribers(organizationId, [subscriberId], { announce: false });
    const snapshot = built.get(subscriberId);
    return snapshot ?? { version: 0, doc: MISSING_SUBSCRIBER };
  });

  app.post('/internal/snapshots/organization', { schema: { hide: true, body: OrganizationBody } }, async (request) => {
    const published = await publisher.publishOrganization(request.body.organization_id);
    if (!published) throw notFound('No such organization.');
    return { catalog: published.catalog, auth_version: published.authVersion, arrangement: published.arrangement };
  });
}
