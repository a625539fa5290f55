import { loadConfig } from '@ent/common/config';
import { exitWithParent, parentToFollow } from '@ent/common/process/exit-with-parent';
import { buildGatewayApp } from './app.ts';

const config = loadConfig();
const parentPid = parentToFollow();
if (parentPid) exitWithParent(parentPid);
const app = await buildGatewayApp({ config });

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}

await app.listen({ host: config.host, port: config.gatewayPort });
