import Fastify, { type FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql, type Kysely } from 'kysely';
import { systemClock, type Clock } from '@ent/common/clock';
import type { Config } from '@ent/common/config';
import type { Database } from '@ent/common/db/database';
import { bodyOverLimitRefusal } from '@ent/common/http/body-over-limit';
import { errorHandling } from '@ent/common/http/error-handler';
import { health } from '@ent/common/http/health';
import { fastifyLoggerOptions, OneLinePerRequest, type LoggerSettings } from '@ent/common/http/logging';
import { metrics } from '@ent/common/http/metrics';
import { sharedServerOptions } from '@ent/common/http/server-options';
import { strictRoutes } from '@ent/common/http/strict-routes';
import { validatorCompiler } from '@ent/common/http/validation';
import type { RedisClient } from '@ent/common/redis/connect';
import { requestIdFrom } from './http/request-id.ts';
import { adminMetrics } from './plugins/admin-metrics.ts';
import { audit } from './features/audit/plugin.ts';
import { authentication } from './plugins/auth.ts';
import { sessionCredential } from './features/console-sessions/authenticate.ts';
import { infrastructure } from './plugins/infrastructure.ts';
import { openapi } from './plugins/openapi.ts';
import { queues } from './plugins/queues.ts';
import { writePipeline } from './features/shared/write/pipeline.ts';
import { idempotency } from './features/shared/write/idempotency.ts';
import { routes } from './routes.ts';
import { queueNames } from './job-registry.ts';
import { outboxMetrics } from './features/outbox/metrics.ts';
import { webhookMetrics } from './features/webhook/metrics.ts';
import { meteredUsageMetrics } from './features/metered-usage/metrics.ts';
import { snapshots } from './features/snapshots/plugin.ts';
import { outbox, type OutboxOptions } from './features/outbox/plugin.ts';
import { importsRunner, type ImportsOptions } from './features/imports/plugin.ts';

export interface AdminAppOptions {
  config: Config;
  clock?: Clock;
  db?: Kysely<Database>;
  redis?: RedisClient;
  logger?: LoggerSettings;
  /** The console's build to serve at /console (tests point it elsewhere; console/dist by default). */
  consoleDistDir?: string;
  /** Admin's own outbox relay passes after an undelivered write-through (features/outbox/follow-up.ts). */
  relayFollowUp?: OutboxOptions['relayFollowUp'];
  /** Bulk imports' runner settings and body limit (tests lower them). */
  imports?: ImportsOptions;
}

export type AdminApp = FastifyInstance;

const REQUEST_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** Builds the admin service without listening: tests call `inject`, server.ts calls `listen`. */
export async function buildAdminApp(options: AdminAppOptions): Promise<AdminApp> {
  const { config } = options;
  const app = Fastify({
    logger: fastifyLoggerOptions(options.logger ?? { level: config.logLevel }),
    logController: new OneLinePerRequest(),
    ...sharedServerOptions(config),
    genReqId: requestIdFrom(true),
    trustProxy: config.trustedProxies,
  }).withTypeProvider<TypeBoxTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);

  await app.register(errorHandling);
  await app.register(strictRoutes);
  await app.register(infrastructure, {
    config,
    clock: options.clock ?? systemClock,
    db: options.db,
    redis: options.redis,
  });
  await app.register(metrics, {
    requestDurationBuckets: REQUEST_DURATION_BUCKETS,
    publicPortMetrics: config.publicPortMetrics,
  });
  await app.register(queues, { names: queueNames });
  await app.register(openapi);
  // Admin serves with Postgres (DESIGN.md). Redis is reported but never decides: writes still commit and answer
  // without it (the outbox brings Redis up to date), so taking admin out of rotation for it would only add failed
  // writes.
  await app.register(health, {
    checks: { postgres: () => sql`SELECT 1`.execute(app.db), redis: () => app.redis.ping() },
    decisive: ['postgres'],
  });
  await app.register(adminMetrics);
  await app.register(outboxMetrics);
  await app.register(webhookMetrics);
  await app.register(meteredUsageMetrics);
  await app.register(writePipeline);
  await app.register(snapshots);
  await app.register(outbox, { relayFollowUp: options.relayFollowUp });
  await app.register(importsRunner, options.imports ?? {});
  await app.register(authentication, { sessions: sessionCredential });
  // Before the audit log: a repeated Idempotency-Key is answered before any audit entry is made.
  await app.register(idempotency);
  await app.register(audit);
  await app.register(bodyOverLimitRefusal);
  await app.register(routes, { consoleDistDir: options.consoleDistDir });
  return app;
}
