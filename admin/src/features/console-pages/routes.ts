import { stat } from 'node:fs/promises';
import { join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { noRoute, notFound, serviceUnavailable } from '@ent/common/errors/app-error';

/** Where `npm run console:build` writes the single-page app (the repository's console/dist). */
const DEFAULT_CONSOLE_DIST = fileURLToPath(new URL('../../../../console/dist/', import.meta.url));

/**
 * Console pages may load only their own scripts, styles and images, and be framed by nobody; the invite token
 * is in the join page's URL, so no request from a console page names it in a Referer.
 */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};

/** Vite puts content-hashed files under assets/: a name never gets other content, so they are cached for a year. */
const HASHED_ASSETS = `assets${sep}`;
const ONE_YEAR_SECONDS = 365 * 24 * 60 * 60;

const notBuilt = () =>
  serviceUnavailable('The console has not been built; run `npm run console:build` and reload.', {
    field: 'console',
  });

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/** Not index.html (always served with the page's own headers), and no dotfile. */
const isServedAsItself = (relative: string): boolean =>
  relative !== 'index.html' && !relative.split(sep).some((part) => part.startsWith('.'));

/**
 * `/console` and every `/console/*` path but `/console/api/*`: an existing file of the build, else index.html
 * (the single-page app routes itself, e.g. `/console/join/<token>`). index.html is revalidated on every load
 * (`no-cache`), so a new build is picked up at once; missing, the console answers 503 naming the build command.
 */
export async function consolePageRoutes(app: FastifyInstance, options: { distDir?: string }): Promise<void> {
  const root = normalize(options.distDir ?? DEFAULT_CONSOLE_DIST).replace(/[\\/]+$/, '') + sep;
  const indexHtml = join(root, 'index.html');
  await app.register(fastifyStatic, { root, serve: false });

  async function serve(reply: FastifyReply, wanted: string): Promise<FastifyReply> {
    reply.headers(SECURITY_HEADERS);
    const file = normalize(join(root, wanted));
    const relative = file.slice(root.length);
    if (file.startsWith(root) && isServedAsItself(relative) && (await isFile(file))) {
      if (relative.startsWith(HASHED_ASSETS)) {
        return reply.sendFile(relative, { maxAge: ONE_YEAR_SECONDS * 1000, immutable: true });
      }
      reply.header('cache-control', 'no-cache');
      return reply.sendFile(relative, { cacheControl: false });
    }
    // A build's file that is not there (a chunk of an older build, after a new one): 404, not the page as a script,
    // so the page loading it fails cleanly and offers a reload.
    if (relative.startsWith(HASHED_ASSETS)) throw notFound(`No console file "${wanted}".`, { field: 'path' });
    if (!(await isFile(indexHtml))) throw notBuilt();
    reply.header('cache-control', 'no-cache');
    return reply.sendFile('index.html', { cacheControl: false });
  }

  app.get('/console', { schema: { hide: true } }, (_request, reply) => serve(reply, ''));
  app.get<{ Params: { '*': string } }>('/console/*', { schema: { hide: true } }, async (request, reply) => {
    const wanted = request.params['*'];
    if (wanted === 'api' || wanted.startsWith('api/')) {
      throw noRoute(request.method, request.url);
    }
    return serve(reply, wanted);
  });
}
