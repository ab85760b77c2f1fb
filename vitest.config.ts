import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Tests start real Python workers: give them time, and keep files sequential on a 2-core machine.
    testTimeout: 300_000,
    hookTimeout: 600_000,
    fileParallelism: false,
  },
});
