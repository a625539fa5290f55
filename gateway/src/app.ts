import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { systemClock, type Clock } from '@ent/common/clock';
import type { Config } from '@ent/common/config';
import { errorHandling } from '@ent/common/http/error-handler';
import { health, PROBE_TIMEOUT_MS } from '@ent/common/http/health';
import { lazyRequestLoggers, type LoggerSettings } from '@ent/common/http/lazy-child-logger';
import { metrics } from '@ent/common/http/metrics';
import { sharedServerOptions } from '@ent/common/http/server-options';
import { strictRoutes } from '@ent/common/http/strict-routes';
import { validatorCompiler } from '@ent/common/http/validation';
import type { EvalMeter } from './metering/contract.ts';
import type { RedisClient } from '@ent/common/redis/connect';
import { evalRoutes } from './features/evals/routes.ts';
import { evaluator } from './features/evals/evaluator.ts';
import { snapshotCache } from './features/evals/snapshot-cache.ts';
import { forwardImports } from './features/forwarding/imports.ts';
import { forwardToAdmin } from './features/forwarding/routes.ts';
import { ofrepRoutes } from './features/ofrep/routes.ts';
import { sessions } from './features/sessions/sessions.ts';
import { usageRoute } from './features/usage/routes.ts';
import { meteredUsageRoutes } from './features/metered-usage/routes.ts';
import { meter } from './metering/plugin.ts';
import { adminClient } from './plugins/admin-client.ts';
import { infrastructure } from './plugins/infrastructure.ts';
import { gatewayMetrics } from './plugins/gateway-metrics.ts';
import { pipelineOrder } from './plugins/pipeline-order.ts';
import { principals } from './plugins/principals.ts';
import { newRequestId } from './request-ids.ts';

export interface GatewayAppOptions {
  config: Config;
  clock?: Clock;
  /** Injected by tests; otherwise a fail-fast connection is created here and closed on shutdown. */
  redis?: RedisClient;
  meter?: EvalMeter;
  logger?: LoggerSettings;
  /**
   * False in tests that show the gate call's version check keeps answers fresh on its own, with no invalidation
   * announcement (a best-effort hint) arriving first.
   */
  subscribeInvalidations?: boolean;
}

export type GatewayApp = FastifyInstance;

const REQUEST_DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

/** Admin's `/healthz` answers 200 within the probe's timeout. */
async function adminAnswers(app: FastifyInstance): Promise<void> {
  const res = await app.adminPool.request({
    method: 'GET',
    path: '/healthz',
    headersTimeout: PROBE_TIMEOUT_MS,
    bodyTimeout: PROBE_TIMEOUT_MS,
  });
  await res.body.dump();
  if (res.statusCode !== 200) throw new Error(`admin answered ${res.statusCode}`);
}

/** Builds the gateway without listening: tests call `inject`, server.ts calls `listen`. */
export async function buildGatewayApp(options: GatewayAppOptions): Promise<GatewayApp> {
  const { config } = options;
  const app = Fastify({
    ...lazyRequestLoggers(options.logger ?? { level: config.logLevel }),
    // The gateway is the public edge: it makes its own request ids and passes them on to admin.
    genReqId: newRequestId,
    ...sharedServerOptions(config),
    logController: new LogController({ disableRequestLogging: true }),
    // The gateway is the public edge: only proxies in front of it (if any) may say who the client is.
    trustProxy: config.gatewayTrustedProxies.length ? config.gatewayTrustedProxies : false,
  }).withTypeProvider<TypeBoxTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);

  await app.register(errorHandling);
  await app.register(strictRoutes);
  await app.register(pipelineOrder);
  await app.register(infrastructure, { config, clock: options.clock ?? systemClock, redis: options.redis });
  await app.register(metrics, {
    requestDurationBuckets: REQUEST_DURATION_BUCKETS,
    publicPortMetrics: config.publicPortMetrics,
  });
  await app.register(gatewayMetrics);
  await app.register(adminClient);
  await app.register(principals);
  await app.register(sessions);
  await app.register(snapshotCache, {
    maxBytes: config.gatewayCacheBytes,
    subscribeInvalidations: options.subscribeInvalidations ?? true,
  });
  await app.register(meter, { meter: options.meter });
  // The gateway answers evals with Redis alone (DESIGN.md). Admin's state is reported but never decides: taking
  // every gateway out of rotation because admin is down would also stop the evals, which do not need it.
  await app.register(health, {
    checks: { redis: () => app.redis.ping(), admin: () => adminAnswers(app) },
    decisive: ['redis'],
  });
  await app.register(evaluator);
  await app.register(evalRoutes);
  await app.register(ofrepRoutes);
  await app.register(usageRoute);
  await app.register(meteredUsageRoutes);
  await app.register(forwardImports);
  await app.register(forwardToAdmin);
  return app;
}
