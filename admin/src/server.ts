import { loadConfig } from '@ent/common/config';
import { assertSecretsKeyringUsable } from '@ent/common/crypto/keyring';
import { ADMIN_SOCKET_TIMEOUT_MS } from '@ent/common/http/server-options';
import { followStarter } from '@ent/common/process/exit-with-parent';
import { serve } from '@ent/common/process/serve';
import { buildAdminApp } from './app.ts';

const config = loadConfig();
assertSecretsKeyringUsable(config.secretsKey);
followStarter('admin');
const app = await buildAdminApp({ config });
// A request still unanswered after this is cut off by admin itself, before the gateway's forward gives up.
app.server.setTimeout(ADMIN_SOCKET_TIMEOUT_MS);

await serve(
  { app, lifecycle: app.lifecycle, readiness: app.readiness, registry: app.metrics.registry },
  config,
  { public: config.adminPort, operations: config.adminMetricsPort },
);
