import type { FastifyInstance } from 'fastify';
import { featureRoutes } from './features/features/routes.ts';

/** Every route family of the admin service. One line per feature folder. */
export async function routes(app: FastifyInstance): Promise<void> {
  await app.register(featureRoutes);
}
