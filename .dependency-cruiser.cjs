/* global module */
/**
 * Layering and cycles, checked by `npm run lint` (and so by CI). The services share only `common/` (what both run)
 * and `contract/` (the API's schemas, which the console and the SDK's generator take too); neither imports the
 * other, production code never imports tests, and no module depends on itself through others
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
      to: { path: '^(admin|gateway|sdk|bench|console)/' },
    },
    {
      name: 'sdk-stands-alone',
      severity: 'error',
      comment: 'The SDK is published on its own: it imports only itself and its dependencies.',
      from: { path: '^sdk/src/' },
      to: { path: '^(admin|gateway|common|bench|test-support)/' },
    },
    {
      name: 'contract-stands-alone',
      severity: 'error',
      comment:
        "The contract is the API's shapes, imported by both services and the console bundle: it imports nothing of the repository, and of npm only the schema library.",
      from: { path: '^contract/src/' },
      to: { path: '^(?!contract/src/)', pathNot: '(^|/)node_modules/@sinclair/typebox/' },
    },
    {
      name: 'console-takes-only-the-contract',
      severity: 'error',
      comment:
        "The console is a browser bundle that reaches the services over HTTP: of this repository it imports only the contract (the API's types and the role → scopes table), never server code (pg, ioredis, fastify).",
      from: { path: '^console/src/' },
      to: { path: '^(admin|gateway|sdk|bench|test-support|common)/' },
    },
    {
      name: 'production-code-imports-no-tests',
      severity: 'error',
      from: { path: '^(admin|gateway|common|contract|sdk)/src/' },
      to: { path: '(^test-support/|/test/)' },
    },
    {
      name: 'route-talks-to-its-own-feature',
      severity: 'error',
      comment:
        'A route speaks HTTP and hands the rest to its own feature: it imports its own folder (service, mappers), features/shared/, the plugins and common/ or the contract, never another feature. What two features need lives in the owning service or in features/shared/.',
      from: { path: '^(admin|gateway)/src/features/([^/]+)/routes[.]ts$' },
      to: {
        path: '^(admin|gateway)/src/',
        pathNot: '^$1/src/(features/($2|shared)/|plugins/)',
      },
    },
    {
      name: 'route-runs-no-sql',
      severity: 'error',
      comment:
        'SQL belongs to the store and the rules around it to the service: a route reaches neither store directly.',
      from: { path: '^(admin|gateway)/src/features/[^/]+/routes[.]ts$' },
      to: { path: '(^|/)[^/]*store[.]ts$' },
    },
    {
      name: 'store-belongs-to-its-feature',
      severity: 'error',
      comment:
        "A feature's store.ts holds its SQL and its row locks; another feature goes through that feature's service, so the locking order stays in one place.",
      from: { path: '^(admin|gateway)/src/features/([^/]+)/' },
      to: {
        path: '^(admin|gateway)/src/features/[^/]+/store[.]ts$',
        pathNot: '^$1/src/features/$2/',
      },
    },
    {
      name: 'shared-is-below-features',
      severity: 'error',
      comment:
        'features/shared/ is the one place features share: it imports no feature, or it would tie them together.',
      from: { path: '^(admin|gateway)/src/features/shared/' },
      to: { path: '^(admin|gateway)/src/features/', pathNot: '^(admin|gateway)/src/features/shared/' },
    },
    {
      name: 'plugins-are-infrastructure',
      severity: 'error',
      comment:
        'plugins/ holds infrastructure (database, Redis, queues, authentication, metrics, OpenAPI): it never imports a feature, so features build on plugins and never the other way round. What a plugin needs of a feature (the session credential) is handed to it by app.ts.',
      from: { path: '^(admin|gateway)/src/plugins/' },
      to: { path: '^(admin|gateway)/src/features/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
    },
  },
};
