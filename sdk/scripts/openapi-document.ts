import { loadConfig } from '@ent/common/config';
import { buildAdminApp } from '../../admin/src/app.ts';

/**
 * The live `/openapi.json`, from an admin app built in-process and asked through `inject`: the same document
 * a running admin serves, without a listener. Building the app needs no query (pools connect lazily).
 */
export async function liveOpenApiDocument(): Promise<unknown> {
  const app = await buildAdminApp({ config: { ...loadConfig(process.env), logLevel: 'silent' }, logger: false });
  try {
    await app.ready();
    const res = await app.inject({ method: 'GET', url: '/openapi.json' });
    if (res.statusCode !== 200) throw new Error(`GET /openapi.json -> ${res.statusCode}: ${res.body}`);
    return res.json();
  } finally {
    await app.close();
  }
}
