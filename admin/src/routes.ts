import type { FastifyInstance } from 'fastify';
import { auditRoutes } from './features/audit/routes.ts';
import { featureRoutes } from './features/features/routes.ts';
import { planRoutes } from './features/plans/routes.ts';
import { subscriberRoutes } from './features/subscribers/routes.ts';
import { subscriptionRoutes } from './features/subscriptions/routes.ts';
import { overrideRoutes } from './features/overrides/routes.ts';
import { creditRoutes } from './features/credits/routes.ts';
import { organizationRoutes } from './features/organization/routes.ts';
import { memberRoutes } from './features/members/routes.ts';
import { inviteRoutes } from './features/invites/routes.ts';
import { serviceAccountRoutes } from './features/service-accounts/routes.ts';
import { apiKeyRoutes } from './features/api-keys/routes.ts';
import { webhookRoutes } from './features/webhook/routes.ts';
import { usageRoutes } from './features/usage/routes.ts';
import { meteredUsageRoutes } from './features/metered-usage/usage-routes.ts';
import { consoleAccountRoutes } from './features/console-accounts/routes.ts';
import { consolePageRoutes } from './features/console-pages/routes.ts';
import { internalSessionRoutes } from './features/console-sessions/internal-routes.ts';
import { internalMeteredRoutes } from './features/metered-usage/internal-routes.ts';
import { refuseNulCharacters } from './features/shared/nul-characters.ts';

export interface RoutesOptions {
  /** The console's build (console/dist by default). */
  consoleDistDir?: string;
}

/** Every route family of the admin service. One line per feature folder. */
export async function routes(app: FastifyInstance, options: RoutesOptions): Promise<void> {
  app.addHook('preValidation', refuseNulCharacters);
  await app.register(featureRoutes);
  await app.register(auditRoutes);
  await app.register(planRoutes);
  await app.register(subscriberRoutes);
  await app.register(subscriptionRoutes);
  await app.register(overrideRoutes);
  await app.register(creditRoutes);
  await app.register(organizationRoutes);
  await app.register(memberRoutes);
  await app.register(inviteRoutes);
  await app.register(serviceAccountRoutes);
  await app.register(apiKeyRoutes);
  await app.register(webhookRoutes);
  await app.register(usageRoutes);
  await app.register(meteredUsageRoutes);
  await app.register(consoleAccountRoutes);
  await app.register(internalSessionRoutes);
  await app.register(internalMeteredRoutes);
  await app.register(consolePageRoutes, { distDir: options.consoleDistDir });
}
