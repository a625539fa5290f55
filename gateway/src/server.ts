import { loadConfig } from '@ent/common/config';
import { followStarter } from '@ent/common/process/exit-with-parent';
import { serve } from '@ent/common/process/serve';
import { buildGatewayApp } from './app.ts';
import { youngGenerationWarning } from './runtime-flags.ts';

const config = loadConfig();
followStarter('gateway');
const app = await buildGatewayApp({ config });
const warning = youngGenerationWarning();
if (warning) app.log.warn(warning);

await serve(
  { app, lifecycle: app.lifecycle, readiness: app.readiness, registry: app.gatewayMetrics.registry },
  config,
  { public: config.gatewayPort, operations: config.gatewayMetricsPort },
);
