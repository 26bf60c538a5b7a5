import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds dist/ when src/ changed since the last build (the CLI tests run the compiled coordctl).
    globalSetup: ['test/support/build-once.ts'],
    // Generous: the machine is shared; a hang still fails, and no test asserts speed.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration files start their own redis-server; two workers fit the 2-core machine.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
