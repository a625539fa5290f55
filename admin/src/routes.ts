import type { FastifyInstance } from 'fastify';
import { featureRoutes } from './features/features/routes.ts';
import { planRoutes } from './features/plans/routes.ts';
import { subscriberRoutes } from './features/subscribers/routes.ts';
import { subscriptionRoutes } from './features/subscriptions/routes.ts';
import { overrideRoutes } from './features/overrides/routes.ts';

/** Every route family of the admin service. One line per feature folder. */
export async function routes(app: FastifyInstance): Promise<void> {
  await app.register(featureRoutes);
  await app.register(planRoutes);
  await app.register(subscriberRoutes);
  await app.register(subscriptionRoutes);
  await app.register(overrideRoutes);
}
