/**
 * The production build of the three services and the CLI: one ES module bundle per entry point, written flat into
 * one directory (`dist/` by default) with linked source maps, so `node --enable-source-maps dist/gateway.js` runs
 * the gateway with stack traces pointing at the TypeScript. esbuild strips the types and bundles this repository's
 * own modules (the `@ent/*` workspaces included); every npm dependency stays an import of node_modules, which the
 * deployment installs as usual.
 */
import { readFile } from 'node:fs/promises';
import { isBuiltin } from 'node:module';
import { join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

export const root = fileURLToPath(new URL('..', import.meta.url));

/** Each bundle's name (`<outdir>/<name>.js`) and the source it starts from. */
export const SERVICE_ENTRY_POINTS = {
  gateway: 'gateway/src/server.ts',
  admin: 'admin/src/server.ts',
  worker: 'admin/src/worker.ts',
  entctl: 'admin/src/cli/entctl.ts',
} as const;

export const DEFAULT_OUTDIR = join(root, 'dist');

const toImportPath = (from: string, to: string) => {
  const path = relative(from, to).split(sep).join('/');
  return path.startsWith('.') ? path : `./${path}`;
};

const RESOLVING = Symbol('resolving a dependency');

/**
 * npm dependencies stay imports, resolved by Node at run time. Most are hoisted to the root node_modules, where the
 * bundle finds them by name. A workspace may hold its own version of a package (common/node_modules/ajv is v8 while
 * the root's is v6): that import is rewritten to the file path the source would have reached, since the bundle sits
 * outside that workspace and would get the root's version by name.
 */
function dependenciesFromNodeModules(outdir: string): Plugin {
  const hoisted = join(root, 'node_modules') + sep;
  return {
    name: 'dependencies-from-node-modules',
    setup(builder) {
      builder.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData === RESOLVING || args.path.startsWith('@ent/')) return undefined;
        if (isBuiltin(args.path)) return { path: args.path, external: true };
        const found = await builder.resolve(args.path, {
          kind: args.kind,
          resolveDir: args.resolveDir,
          importer: args.importer,
          pluginData: RESOLVING,
        });
        if (found.errors.length > 0) return { errors: found.errors };
        if (found.path.startsWith(hoisted)) return { path: args.path, external: true };
        return { path: toImportPath(outdir, found.path), external: true };
      });
    },
  };
}

/**
 * `import.meta.url` keeps meaning the source file's URL: the Lua scripts (common/src/redis/lua) and the console's
 * build (console/dist) are found where the source expects them, from the bundle as from the TypeScript.
 */
function sourceImportMetaUrl(outdir: string): Plugin {
  return {
    name: 'source-import-meta-url',
    setup(builder) {
      builder.onLoad({ filter: /\.ts$/ }, async (args) => {
        if (args.path.includes(`${sep}node_modules${sep}`)) return undefined;
        const source = await readFile(args.path, 'utf8');
        if (!source.includes('import.meta.url')) return undefined;
        const sourceUrl = `new URL(${JSON.stringify(toImportPath(outdir, args.path))}, import.meta.url).href`;
        return { contents: source.replaceAll('import.meta.url', sourceUrl), loader: 'ts' };
      });
    },
  };
}

/** Builds every entry point into `outdir` (inside this repository, so the bundles find its node_modules). */
export async function buildServices(outdir: string = DEFAULT_OUTDIR): Promise<string[]> {
  const absoluteOutdir = resolve(outdir);
  if (relative(root, absoluteOutdir).startsWith('..')) {
    throw new Error(`the build goes inside the repository, where node_modules is: ${absoluteOutdir}`);
  }
  const entryPoints = Object.fromEntries(
    Object.entries(SERVICE_ENTRY_POINTS).map(([name, source]) => [name, join(root, source)]),
  );
  await build({
    entryPoints,
    outdir: absoluteOutdir,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: 'linked',
    // Stack traces need the mappings only; the sources are not shipped next to the bundles.
    sourcesContent: false,
    logLevel: 'warning',
    plugins: [dependenciesFromNodeModules(absoluteOutdir), sourceImportMetaUrl(absoluteOutdir)],
  });
  return Object.keys(SERVICE_ENTRY_POINTS).map((name) => join(absoluteOutdir, `${name}.js`));
}
