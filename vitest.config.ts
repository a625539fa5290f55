import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['{common,admin,gateway,bench,sdk,console}/test/**/*.test.ts'],
    globalSetup: ['test-support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    fileParallelism: true,
  },
});
