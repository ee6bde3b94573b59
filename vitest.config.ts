import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Suites talk to real servers started by test/harness/run.ts; allow for a cold JVM.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores: two files at a time keeps races honest without starving the servers.
    maxWorkers: 2,
    reporters: ['default'],
    // Handlers under test would print CloudWatch EMF lines for every metric.
    env: { POWERTOOLS_METRICS_DISABLED: 'true' },
  },
});
