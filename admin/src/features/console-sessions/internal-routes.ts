import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { SessionDoc } from '@ent/common/auth/session-doc';
import { internalAccess } from '../../plugins/internal-access.ts';
import { liveSessionByHash } from './service.ts';

const SessionLookupBody = Type.Object(
  { token_hash: Type.String({ pattern: '^[0-9a-f]{64}$' }) },
  { additionalProperties: false },
);

/**
 * `POST /internal/session`: who a console session is, asked by a gateway on every eval (and OFREP) request that
 * carries a session cookie instead of a key. Never cached there, so a sign-out, a password change or a
 * suspension takes effect on the next request. `{ session: null }` when it does not live (not a 404: that
 * answer means the route is hidden, an INTERNAL_TOKEN mismatch).
 */
export async function internalSessionRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.addHook('onRequest', internalAccess(app.config));

  app.post('/internal/session', { schema: { hide: true, body: SessionLookupBody } }, async (request) => {
    const session = await liveSessionByHash(app.db, request.body.token_hash, new Date(app.clock.now()));
    const doc: SessionDoc | null = session && {
      organizationId: session.organizationId,
      memberId: session.memberId,
      sessionId: session.id,
      keyPrefix: session.keyPrefix,
      role: session.role,
      csrfHash: session.csrfHash,
    };
    return { session: doc };
  });
}
