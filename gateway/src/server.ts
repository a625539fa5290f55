import { loadConfig } from '@ent/common/config';
import { followStarter } from '@ent/common/process/exit-with-parent';
import { serve } from '@ent/common/process/serve';
import { buildGatewayApp } from './app.ts';

const config = loadConfig();
followStarter('gateway');
const app = await buildGatewayApp({ config });

await serve(
  { app, lifecycle: app.lifecycle, readiness: app.readiness, registry: app.gatewayMetrics.registry },
  config,
  { public: config.gatewayPort, operations: config.gatewayMetricsPort },
);
