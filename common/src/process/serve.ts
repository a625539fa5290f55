import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import type { Config } from '../config.ts';
import { buildOperationsApp, type Readiness } from '../http/operations-app.ts';
import { checkRedisLogin, RedisLoginError } from '../redis/connect.ts';
import { installGracefulShutdown, type Lifecycle } from './graceful-shutdown.ts';

export interface Served {
  app: FastifyInstance;
  lifecycle: Lifecycle;
  readiness(): Promise<Readiness>;
  registry: Registry;
}

/**
 * What admin's and the gateway's server.ts share: the public listener, the operations port when one is
 * configured, and the graceful shutdown. app.close() stops listening, lets requests in flight finish, then runs
 * the onClose hooks (the gateway's meter settles its counts, the clients disconnect); the operations port closes
 * last, so its /readyz says shutting_down for the whole drain.
 */
export async function serve(
  service: Served,
  config: Pick<
    Config,
    'host' | 'metricsHost' | 'shutdownDrainDelayMs' | 'shutdownTimeoutMs' | 'redisUrl' | 'redisClusterNodes'
  >,
  ports: { public: number; operations: number },
): Promise<void> {
  const { app } = service;
  // A Redis that refuses REDIS_URL's login will never let the service work, and ioredis would retry forever
  // behind 503s: stop and say why. An unreachable Redis is waited for, as everywhere (readiness says so).
  checkRedisLogin(config).catch((error: unknown) => {
    if (!(error instanceof RedisLoginError)) return;
    app.log.fatal(error.message);
    process.exit(1);
  });
  const operations = ports.operations
    ? await buildOperationsApp({ registry: service.registry, readiness: service.readiness })
    : null;
  installGracefulShutdown({
    lifecycle: service.lifecycle,
    drainDelayMs: config.shutdownDrainDelayMs,
    timeoutMs: config.shutdownTimeoutMs,
    close: async () => {
      await app.close();
      await operations?.close();
    },
    httpServer: app.server,
    log: { info: (message) => app.log.info(message), error: (message) => app.log.error(message) },
  });
  await app.listen({ host: config.host, port: ports.public });
  if (operations) {
    await operations.listen({ host: config.metricsHost, port: ports.operations });
    app.log.info(`metrics and detailed readiness on ${config.metricsHost}:${ports.operations}`);
  }
}
