import { loadConfig } from '@ent/common/config';
import { buildOperationsApp } from '@ent/common/http/operations-app';
import { exitWithParent, parentToFollow } from '@ent/common/process/exit-with-parent';
import { installGracefulShutdown } from '@ent/common/process/graceful-shutdown';
import { buildGatewayApp } from './app.ts';

const config = loadConfig();
const parentPid = parentToFollow();
if (parentPid) exitWithParent(parentPid);
const app = await buildGatewayApp({ config });
const operations = config.gatewayMetricsPort
  ? await buildOperationsApp({ registry: app.gatewayMetrics.registry, readiness: app.readiness })
  : null;

// app.close() stops listening, lets requests in flight finish, then runs the onClose hooks (the meter's hook
// hands the evals counted offline to Redis, the clients disconnect).
installGracefulShutdown({
  lifecycle: app.lifecycle,
  drainDelayMs: config.shutdownDrainDelayMs,
  timeoutMs: config.shutdownTimeoutMs,
  // The operations port closes last, so its /readyz says shutting_down for the whole drain.
  close: async () => {
    await app.close();
    await operations?.close();
  },
  httpServer: app.server,
  log: (message) => app.log.warn(message),
});

await app.listen({ host: config.host, port: config.gatewayPort });
if (operations) {
  await operations.listen({ host: config.metricsHost, port: config.gatewayMetricsPort });
  app.log.info(`metrics and detailed readiness on ${config.metricsHost}:${config.gatewayMetricsPort}`);
}
