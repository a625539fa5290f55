import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { internalAccess } from '../../plugins/internal-access.ts';
import { refillFigures } from './open-balances.ts';

const BalancesQuery = Type.Object(
  { organization_id: Type.String({ minLength: 1, maxLength: 255 }) },
  { additionalProperties: false },
);

/**
 * `GET /internal/metered/balances?organization_id=`: the organization's balances whose period has not ended, with
 * their revisions, and what its live credits spent (`refillFigures`), for a gateway refilling a Redis that came back
 * without them (decisions.md, "Metered usage: how
 * it is built"). Outside /org: gateways never forward it from the public port.
 */
export async function internalMeteredRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.addHook('onRequest', internalAccess(app.config));

  app.get(
    '/internal/metered/balances',
    { exposeHeadRoute: false, schema: { hide: true, querystring: BalancesQuery } },
    async (request) => refillFigures(app.db, request.query.organization_id, new Date(app.clock.now())),
  );
}
