/** `npm run build` (the services' part): dist/gateway.js, dist/admin.js, dist/worker.js and dist/entctl.js. */
import { relative } from 'node:path';
import { buildServices, root } from './build-services.ts';

const started = Date.now();
const files = await buildServices();
process.stdout.write(
  `[build] ${files.map((file) => relative(root, file)).join(', ')} in ${Date.now() - started} ms\n`,
);
