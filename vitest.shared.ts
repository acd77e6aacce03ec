import { defineConfig } from 'vitest/config';

/**
 * One vitest setup for every package: tests under test/, and a JSON report
 * that scripts/test.mjs sums into the closing `N passed, N failed` line.
 * `--expose-gc`: the resource suites collect the tensors their loops drop.
 */
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    execArgv: ['--expose-gc'],
    reporters: ['default', ['json', { outputFile: '.test-results/vitest.json' }]],
  },
});
