import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // the pinned Python runtime is created before the first test file if it does not exist yet
    globalSetup: ['test/setup/runtime.ts'],
    // Tests start real Python workers: give them time, and keep files sequential on a 2-core machine.
    testTimeout: 300_000,
    hookTimeout: 600_000,
    fileParallelism: false,
  },
});
