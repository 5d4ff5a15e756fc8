import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // libchdb binds one data directory per process: every test file gets its own process.
    pool: 'forks',
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
