import { loadConfig } from '@ent/common/config';
import { exitWithParent, parentToFollow } from '@ent/common/process/exit-with-parent';
import { serve } from '@ent/common/process/serve';
import { buildGatewayApp } from './app.ts';

const config = loadConfig();
const parentPid = parentToFollow();
if (parentPid) exitWithParent(parentPid);
const app = await buildGatewayApp({ config });

await serve(
  { app, lifecycle: app.lifecycle, readiness: app.readiness, registry: app.gatewayMetrics.registry },
  config,
  { public: config.gatewayPort, operations: config.gatewayMetricsPort },
);
