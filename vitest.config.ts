import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['{common,admin,gateway,bench,sdk,console}/test/**/*.test.ts'],
    globalSetup: ['test-support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // A fork keeps the modules it loaded from one test file to the next (isolate: false): loading them again for each
    // file cost the suite about a third of its time. Files stay apart by their own database and Redis prefix, and no
    // module keeps state that one app or file could leave for another (docs/decisions.md, "The suite's forks").
    poolOptions: { forks: { maxForks: 2, minForks: 1, isolate: false } },
    fileParallelism: true,
  },
});
