import { loadConfig } from '@ent/common/config';
import { buildOperationsApp } from '@ent/common/http/operations-app';
import { assertSecretsKeyringUsable } from '@ent/common/crypto/keyring';
import { ADMIN_SOCKET_TIMEOUT_MS } from '@ent/common/http/server-options';
import { exitWithParent, parentToFollow } from '@ent/common/process/exit-with-parent';
import { installGracefulShutdown } from '@ent/common/process/graceful-shutdown';
import { buildAdminApp } from './app.ts';

const config = loadConfig();
assertSecretsKeyringUsable(config.secretsKey);
const parentPid = parentToFollow();
if (parentPid) exitWithParent(parentPid);
const app = await buildAdminApp({ config });
const operations = config.adminMetricsPort
  ? await buildOperationsApp({ registry: app.metrics.registry, readiness: app.readiness })
  : null;
// A request still unanswered after this is cut off by admin itself, before the gateway's forward gives up.
app.server.setTimeout(ADMIN_SOCKET_TIMEOUT_MS);

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

await app.listen({ host: config.host, port: config.adminPort });
if (operations) {
  await operations.listen({ host: config.metricsHost, port: config.adminMetricsPort });
  app.log.info(`metrics and detailed readiness on ${config.metricsHost}:${config.adminMetricsPort}`);
}
