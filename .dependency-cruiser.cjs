/* global module */
/**
 * Layering and cycles, checked by `npm run lint` (and so by CI). The services share only `common/`; neither
 * imports the other, production code never imports tests, and no module depends on itself through others
 * (type-only imports included: a type cycle still ties two modules together).
 */
module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      severity: 'error',
      comment: 'A cycle means two modules cannot be understood, tested or moved apart.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'gateway-is-not-admin',
      severity: 'error',
      comment: 'The gateway runs on its own: it reaches admin over HTTP, never through its code.',
      from: { path: '^gateway/src/' },
      to: { path: '^admin/' },
    },
    {
      name: 'admin-is-not-gateway',
      severity: 'error',
      from: { path: '^admin/src/' },
      to: { path: '^gateway/' },
    },
    {
      name: 'common-is-shared',
      severity: 'error',
      comment: 'common/ is what both services share: it depends on neither.',
      from: { path: '^common/src/' },
      to: { path: '^(admin|gateway|sdk|bench)/' },
    },
    {
      name: 'sdk-stands-alone',
      severity: 'error',
      comment: 'The SDK is published on its own: it imports only itself and its dependencies.',
      from: { path: '^sdk/src/' },
      to: { path: '^(admin|gateway|common|bench|test-support)/' },
    },
    {
      name: 'console-takes-only-shared-tables',
      severity: 'error',
      comment:
        'The console is a browser bundle that reaches the services over HTTP. It takes the role → scopes table from common/ so both sides share one source of truth; that module imports nothing, while the rest of common/ is server code (pg, ioredis, fastify).',
      from: { path: '^console/src/' },
      to: {
        path: '^(admin|gateway|sdk|bench|test-support|common)/',
        pathNot: '^common/src/auth/scopes[.]ts$',
      },
    },
    {
      name: 'production-code-imports-no-tests',
      severity: 'error',
      from: { path: '^(admin|gateway|common|sdk)/src/' },
      to: { path: '(^test-support/|/test/)' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};
