import { loadConfig } from '@ent/common/config';
import { exitWithParent, parentToFollow } from '@ent/common/process/exit-with-parent';
import { installGracefulShutdown } from '@ent/common/process/graceful-shutdown';
import { buildGatewayApp } from './app.ts';

const config = loadConfig();
const parentPid = parentToFollow();
if (parentPid) exitWithParent(parentPid);
const app = await buildGatewayApp({ config });

// app.close() stops listening, lets requests in flight finish, then runs the onClose hooks (the meter's hook
// hands the evals counted offline to Redis, the clients disconnect).
installGracefulShutdown({
  lifecycle: app.lifecycle,
  drainDelayMs: config.shutdownDrainDelayMs,
  timeoutMs: config.shutdownTimeoutMs,
  close: () => app.close(),
  httpServer: app.server,
  log: (message) => app.log.warn(message),
});

await app.listen({ host: config.host, port: config.gatewayPort });
